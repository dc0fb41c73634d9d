#pragma once
// Wires the two reconcilers to the cluster: one informer per kind the controller reads
// (ModelDeployment, ModelPool, StatefulSet, Service, ConfigMap, Deployment, PodDisruptionBudget,
// Pod), event handlers that map a changed object to the key of the object that owns it, a
// rate-limited work queue per reconciler, and worker threads.
//
// Informers start at once (so a standby replica has a warm cache); workers start only when told
// (leader election's on_started_leading). Stop shuts the queues, joins the workers and stops the
// informers.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "controller/reconcile/deployment_spec.h"

namespace tandem::controller::autoscale {
class PodMetricsScraper;
class PrometheusSignalSource;
struct PodTarget;
struct PoolQueryTarget;
}  // namespace tandem::controller::autoscale
namespace tandem::controller::kube {
class Client;
}
namespace tandem::controller::metrics {
class ControllerMetrics;
}
namespace tandem::controller::runtime {
class Informer;
class Sleeper;
class WorkQueue;
}  // namespace tandem::controller::runtime

namespace tandem::controller::reconcile {

class AutoscaleMemory;
class KubeStore;
class EventRecorder;
class ModelDeploymentReconciler;
class ModelPoolReconciler;

struct ManagerOptions {
  std::string watch_namespace;  // "": all namespaces
  int workers = 2;              // per reconciler
  PlanOptions plan;
  const Clock* clock = nullptr;  // work queues and informers; nullptr: SteadyClock
  // Client-side limit on the reconcilers' API requests (cache reads are free); qps <= 0: none.
  double qps = 20;
  int burst = 30;
  // Lists and watches go through this client when set (else the reconcile client), so the
  // reconcile client's traffic is the reconcilers' alone.
  kube::Client* informer_client = nullptr;
  // While the workers run, every cached ModelDeployment and ModelPool is enqueued again this
  // often (controller-runtime's SyncPeriod); zero: never.
  std::chrono::nanoseconds resync_period{0};
  // The built-in autoscaler (docs/autoscaling.md): while the workers run, the ready members of
  // every pool with autoscaling in builtin mode are scraped this often (their /metrics, each
  // request bounded by scrape_timeout) and those pools reconciled after each round; zero: off
  // (builtin pools then hold, reason NoSignals).
  std::chrono::milliseconds autoscale_interval{15'000};
  std::chrono::milliseconds scrape_timeout{1'000};
  // Set: the signals come from this Prometheus server's query API instead of the pods, each query
  // bounded by scrape_timeout (autoscale/prom_query.h; empty selectors: its defaults). A URL or
  // template the source refuses leaves the autoscaler off (logged); the flags are checked first.
  std::string prometheus_url;
  std::string prometheus_selector;
  std::string prometheus_latency_selector;
  std::string prometheus_rate_window = "2m";
};

class Manager {
 public:
  // `client` (reads and writes; fenced by leader election) and `metrics` (may be null) must
  // outlive the manager.
  Manager(kube::Client* client, metrics::ControllerMetrics* metrics, ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  void StartInformers();
  // True once every informer has listed.
  bool Synced() const;
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  // Starts the workers (idempotent).
  void StartWorkers();
  bool WorkersRunning() const { return workers_started_.load(); }
  // Stops workers and informers (idempotent).
  void Stop();

  // Keys reconciled so far (successfully or not), for logs and tests.
  int64_t reconciles() const { return reconciles_.load(); }
  // The informers (one per kind), for tests that compare caches with the server.
  std::vector<const runtime::Informer*> informers() const;

 private:
  void Worker(runtime::WorkQueue* queue, bool deployments);
  void AddInformer(int kind_index, const std::string& label_selector);
  void Resync();
  // The scraper's targets: the ready pods (with an IP) of every builtin-autoscaled pool, and its
  // deployment's ready routers for the latency histograms (latency_only).
  std::vector<autoscale::PodTarget> AutoscaleTargets() const;
  // The Prometheus source's pools: every builtin-autoscaled pool, whatever its members.
  std::vector<autoscale::PoolQueryTarget> AutoscalePools() const;
  // The Prometheus signal source of the options; null (logged) when it refuses them.
  std::unique_ptr<autoscale::PrometheusSignalSource> NewPrometheusSource();

  kube::Client* const client_;
  metrics::ControllerMetrics* const metrics_;
  const ManagerOptions options_;
  const Clock& clock_;
  std::unique_ptr<KubeStore> store_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<AutoscaleMemory> autoscale_memory_;
  // At most one of the two is set; neither when the autoscaler is off.
  std::unique_ptr<autoscale::PodMetricsScraper> scraper_;
  std::unique_ptr<autoscale::PrometheusSignalSource> prometheus_;
  std::unique_ptr<ModelDeploymentReconciler> deployment_reconciler_;
  std::unique_ptr<ModelPoolReconciler> pool_reconciler_;
  std::unique_ptr<runtime::WorkQueue> deployment_queue_;
  std::unique_ptr<runtime::WorkQueue> pool_queue_;
  std::vector<std::unique_ptr<runtime::Informer>> informers_;
  const runtime::Informer* deployment_informer_ = nullptr;
  const runtime::Informer* pool_informer_ = nullptr;
  std::unique_ptr<runtime::Sleeper> resync_sleeper_;
  std::thread resync_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> workers_started_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> reconciles_{0};
};

}  // namespace tandem::controller::reconcile
