#include "controller/metrics/workqueue_hooks.h"

namespace tandem::controller::metrics {

runtime::WorkQueueMetricsHooks WorkQueueHooks(ControllerMetrics* metrics, const std::string& name) {
  runtime::WorkQueueMetricsHooks hooks;
  hooks.on_depth = [metrics, name](int64_t depth) { metrics->SetWorkQueueDepth(name, depth); };
  hooks.on_add = [metrics, name] { metrics->CountWorkQueueAdd(name); };
  hooks.on_retry = [metrics, name] { metrics->CountWorkQueueRetry(name); };
  hooks.on_queue_latency = [metrics, name](double s) { metrics->ObserveWorkQueueLatency(name, s); };
  hooks.on_work_duration = [metrics, name](double s) { metrics->ObserveWorkQueueWork(name, s); };
  return hooks;
}

}  // namespace tandem::controller::metrics
