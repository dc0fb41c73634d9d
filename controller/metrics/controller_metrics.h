#pragma once
// The controller's Prometheus metrics behind a plain C++ interface, so reconcilers, the work
// queue and the leader elector record them without including prometheus-cpp.
//
// Families (ARCHITECTURE.md "Metric names"; label values must stay bounded: controller, pool and
// queue names, result and direction words, never object UIDs or error text):
//   tandem_controller_reconcile_total{controller, result}         counter
//   tandem_controller_reconcile_duration_seconds{controller}      histogram
//   tandem_pool_replicas{deployment, pool, state}                 gauge
//   tandem_autoscaler_decisions_total{deployment, pool, direction} counter
//   tandem_controller_resyncs_total{controller}                   counter
//   tandem_workqueue_depth{name}                                  gauge
//   tandem_workqueue_adds_total{name}                             counter
//   tandem_workqueue_retries_total{name}                          counter
//   tandem_workqueue_queue_duration_seconds{name}                 histogram
//   tandem_workqueue_work_duration_seconds{name}                  histogram
//   tandem_controller_leader                                      gauge (1 leading, 0 not)
//
// Thread-safe: every method may be called from any thread, including under other locks (each is
// a map lookup and an atomic update). Serialize() may run concurrently with updates.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace tandem::controller::metrics {

// Reconcile outcomes, the `result` label (controller-runtime's words).
inline constexpr std::string_view kResultSuccess = "success";
inline constexpr std::string_view kResultError = "error";
inline constexpr std::string_view kResultRequeue = "requeue";
inline constexpr std::string_view kResultRequeueAfter = "requeue_after";

// tandem_pool_replicas `state` values.
inline constexpr std::string_view kReplicasDesired = "desired";
inline constexpr std::string_view kReplicasCurrent = "current";
inline constexpr std::string_view kReplicasReady = "ready";

class ControllerMetrics {
 public:
  // A fresh registry holding every family above (counters start at zero once a label set is
  // first used; tandem_controller_leader starts at 0).
  ControllerMetrics();
  ~ControllerMetrics();
  ControllerMetrics(const ControllerMetrics&) = delete;
  ControllerMetrics& operator=(const ControllerMetrics&) = delete;

  // One finished Reconcile of `controller` ("modeldeployment", "modelpool") that ended with
  // `result` (kResult*) after `seconds`.
  void ObserveReconcile(std::string_view controller, std::string_view result, double seconds);

  // The pool's replica count in `state` (kReplicas*).
  void SetPoolReplicas(std::string_view deployment, std::string_view pool, std::string_view state,
                       int64_t replicas);
  // Drops every tandem_pool_replicas series of the pool (it was deleted), so stale pools do not
  // linger in dashboards.
  void ForgetPool(std::string_view deployment, std::string_view pool);

  // One decision of the built-in autoscaler that changed the pool's replicas: direction "up" or
  // "down" (holds are not counted: the planner runs every scrape round).
  void CountAutoscalerDecision(std::string_view deployment, std::string_view pool,
                               std::string_view direction);

  // One periodic resync of `controller`: every key it owns was enqueued again (--resync-period).
  void CountResync(std::string_view controller);

  // Work queue `name` (client-go's workqueue metrics, prefixed).
  void SetWorkQueueDepth(std::string_view name, int64_t depth);
  void CountWorkQueueAdd(std::string_view name);
  void CountWorkQueueRetry(std::string_view name);
  void ObserveWorkQueueLatency(std::string_view name, double seconds);
  void ObserveWorkQueueWork(std::string_view name, double seconds);

  // Whether this process currently holds the leader Lease.
  void SetLeader(bool leading);

  // The Prometheus text exposition format (version 0.0.4) of every family.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::controller::metrics
