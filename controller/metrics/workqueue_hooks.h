#pragma once
// Connects a runtime::WorkQueue's metric hooks to ControllerMetrics' tandem_workqueue_* families.

#include <string>

#include "controller/metrics/controller_metrics.h"
#include "controller/runtime/workqueue.h"

namespace tandem::controller::metrics {

// Hooks that record queue `name`'s depth, adds, retries and latencies in `metrics`.
// REQUIRES: `metrics` outlives the queue the hooks are given to.
runtime::WorkQueueMetricsHooks WorkQueueHooks(ControllerMetrics* metrics, const std::string& name);

}  // namespace tandem::controller::metrics
