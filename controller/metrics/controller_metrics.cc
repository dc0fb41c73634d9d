#include "controller/metrics/controller_metrics.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace tandem::controller::metrics {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// Reconciles take milliseconds (cache reads, a few writes) to tens of seconds (slow API server).
const Histogram::BucketBoundaries& ReconcileBuckets() {
  static const Histogram::BucketBoundaries b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                1,     2.5,  5,     10,   30,  60};
  return b;
}

// client-go's workqueue buckets: 1 µs to 10 s, factors of ten.
const Histogram::BucketBoundaries& QueueBuckets() {
  static const Histogram::BucketBoundaries b = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10};
  return b;
}

std::string S(std::string_view v) { return std::string(v); }

}  // namespace

struct ControllerMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  Family<Counter>& reconcile_total =
      prometheus::BuildCounter()
          .Name("tandem_controller_reconcile_total")
          .Help("Reconciles finished, by controller and result (success, error, requeue, requeue_after).")
          .Register(*registry);
  Family<Histogram>& reconcile_seconds = prometheus::BuildHistogram()
                                             .Name("tandem_controller_reconcile_duration_seconds")
                                             .Help("Time one Reconcile took, by controller.")
                                             .Register(*registry);
  Family<Gauge>& pool_replicas = prometheus::BuildGauge()
                                     .Name("tandem_pool_replicas")
                                     .Help("Replicas of each ModelPool by state (desired, current, ready).")
                                     .Register(*registry);
  Family<Counter>& autoscaler_decisions =
      prometheus::BuildCounter()
          .Name("tandem_autoscaler_decisions_total")
          .Help("Built-in autoscaler decisions that changed a pool's replicas, by direction (up, down).")
          .Register(*registry);
  Family<Counter>& resyncs =
      prometheus::BuildCounter()
          .Name("tandem_controller_resyncs_total")
          .Help("Periodic resyncs (every cached object enqueued again), by controller.")
          .Register(*registry);
  Family<Gauge>& queue_depth = prometheus::BuildGauge()
                                   .Name("tandem_workqueue_depth")
                                   .Help("Keys queued and ready in each work queue.")
                                   .Register(*registry);
  Family<Counter>& queue_adds = prometheus::BuildCounter()
                                    .Name("tandem_workqueue_adds_total")
                                    .Help("Keys added to each work queue.")
                                    .Register(*registry);
  Family<Counter>& queue_retries = prometheus::BuildCounter()
                                       .Name("tandem_workqueue_retries_total")
                                       .Help("Rate-limited re-adds (retries) in each work queue.")
                                       .Register(*registry);
  Family<Histogram>& queue_latency = prometheus::BuildHistogram()
                                         .Name("tandem_workqueue_queue_duration_seconds")
                                         .Help("Time a key waited in the work queue before a worker took it.")
                                         .Register(*registry);
  Family<Histogram>& queue_work = prometheus::BuildHistogram()
                                      .Name("tandem_workqueue_work_duration_seconds")
                                      .Help("Time a worker spent on a key.")
                                      .Register(*registry);
  Gauge& leader = prometheus::BuildGauge()
                      .Name("tandem_controller_leader")
                      .Help("1 while this controller holds the leader Lease, else 0.")
                      .Register(*registry)
                      .Add({});

  // tandem_pool_replicas series per (deployment, pool), for ForgetPool.
  std::mutex pools_mu;
  std::map<std::pair<std::string, std::string>, std::map<std::string, Gauge*>> pools;
};

ControllerMetrics::ControllerMetrics() : impl_(std::make_unique<Impl>()) {}
ControllerMetrics::~ControllerMetrics() = default;

void ControllerMetrics::ObserveReconcile(std::string_view controller, std::string_view result,
                                         double seconds) {
  impl_->reconcile_total.Add({{"controller", S(controller)}, {"result", S(result)}}).Increment();
  impl_->reconcile_seconds.Add({{"controller", S(controller)}}, ReconcileBuckets()).Observe(seconds);
}

void ControllerMetrics::SetPoolReplicas(std::string_view deployment, std::string_view pool,
                                        std::string_view state, int64_t replicas) {
  std::lock_guard<std::mutex> lock(impl_->pools_mu);
  Gauge*& gauge = impl_->pools[{S(deployment), S(pool)}][S(state)];
  if (gauge == nullptr) {
    gauge =
        &impl_->pool_replicas.Add({{"deployment", S(deployment)}, {"pool", S(pool)}, {"state", S(state)}});
  }
  gauge->Set(static_cast<double>(replicas));
}

void ControllerMetrics::ForgetPool(std::string_view deployment, std::string_view pool) {
  std::lock_guard<std::mutex> lock(impl_->pools_mu);
  auto it = impl_->pools.find({S(deployment), S(pool)});
  if (it == impl_->pools.end()) return;
  for (auto& [state, gauge] : it->second) impl_->pool_replicas.Remove(gauge);
  impl_->pools.erase(it);
}

void ControllerMetrics::CountAutoscalerDecision(std::string_view deployment, std::string_view pool,
                                                std::string_view direction) {
  impl_->autoscaler_decisions
      .Add({{"deployment", S(deployment)}, {"pool", S(pool)}, {"direction", S(direction)}})
      .Increment();
}

void ControllerMetrics::CountResync(std::string_view controller) {
  impl_->resyncs.Add({{"controller", S(controller)}}).Increment();
}

void ControllerMetrics::SetWorkQueueDepth(std::string_view name, int64_t depth) {
  impl_->queue_depth.Add({{"name", S(name)}}).Set(static_cast<double>(depth));
}

void ControllerMetrics::CountWorkQueueAdd(std::string_view name) {
  impl_->queue_adds.Add({{"name", S(name)}}).Increment();
}

void ControllerMetrics::CountWorkQueueRetry(std::string_view name) {
  impl_->queue_retries.Add({{"name", S(name)}}).Increment();
}

void ControllerMetrics::ObserveWorkQueueLatency(std::string_view name, double seconds) {
  impl_->queue_latency.Add({{"name", S(name)}}, QueueBuckets()).Observe(seconds);
}

void ControllerMetrics::ObserveWorkQueueWork(std::string_view name, double seconds) {
  impl_->queue_work.Add({{"name", S(name)}}, QueueBuckets()).Observe(seconds);
}

void ControllerMetrics::SetLeader(bool leading) { impl_->leader.Set(leading ? 1 : 0); }

std::string ControllerMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace tandem::controller::metrics
