#include "controller/reconcile/manager.h"

#include <chrono>
#include <exception>

#include "common/logging.h"
#include "controller/autoscale/prom_query.h"
#include "controller/autoscale/scraper.h"
#include "controller/kube/client.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/metrics/workqueue_hooks.h"
#include "controller/reconcile/autoscaler.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/kube_store.h"
#include "controller/reconcile/pool_plan.h"
#include "controller/reconcile/pool_status.h"
#include "controller/reconcile/reconciler.h"
#include "controller/runtime/clock_wait.h"
#include "controller/runtime/informer.h"
#include "controller/runtime/rate_limiter.h"
#include "controller/runtime/workqueue.h"

namespace tandem::controller::reconcile {
namespace {

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The controller ownerReference's kind and "namespace/name" key, or empty strings.
void ControllerOwner(const json& object, std::string* kind, std::string* key) {
  kind->clear();
  key->clear();
  const json* meta = FieldReader(object).Object("/metadata");
  if (meta == nullptr || !meta->contains("ownerReferences") || !meta->at("ownerReferences").is_array())
    return;
  for (const json& ref : meta->at("ownerReferences")) {
    if (!ref.is_object() || ref.value("controller", false) != true) continue;
    *kind = ref.value("kind", "");
    *key = meta->value("namespace", "") + "/" + ref.value("name", "");
    return;
  }
}

// Conflicts, cache lag and transient API errors are ordinary retries, not errors.
std::string_view ResultOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return metrics::kResultSuccess;
    case StatusCode::kAborted:
    case StatusCode::kFailedPrecondition:  // writes fenced: leadership is being lost
    case StatusCode::kAlreadyExists:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded: return metrics::kResultRequeue;
    default: return metrics::kResultError;
  }
}

// The agent container's port named "metrics" (the pod template's), else the default.
int64_t MetricsPort(const json& pod) {
  int64_t port = kMetricsPort;
  const json* spec = FieldReader(pod).Object("/spec");
  if (spec == nullptr || !spec->contains("containers") || !spec->at("containers").is_array()) return port;
  for (const json& c : spec->at("containers")) {
    if (!c.is_object() || !c.contains("ports") || !c.at("ports").is_array()) continue;
    for (const json& p : c.at("ports")) {
      if (StringField(p, "name") == "metrics" && p.contains("containerPort") &&
          p.at("containerPort").is_number_integer())
        port = p.at("containerPort").get<int64_t>();
    }
  }
  return port;
}

}  // namespace

Manager::Manager(kube::Client* client, metrics::ControllerMetrics* metrics, ManagerOptions options)
    : client_(client),
      metrics_(metrics),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SteadyClock::Default()) {
  resync_sleeper_ = std::make_unique<runtime::Sleeper>(clock_);
  store_ = std::make_unique<KubeStore>(client_, clock_, options_.qps, options_.burst);
  events_ = std::make_unique<EventRecorder>(store_.get(), "tandem-controller", UnixSeconds);
  ReconcileContext ctx{store_.get(), events_.get(), metrics_, UnixSeconds, options_.plan};
  autoscale_memory_ = std::make_unique<AutoscaleMemory>();
  if (options_.autoscale_interval.count() > 0 && !options_.prometheus_url.empty()) {
    prometheus_ = NewPrometheusSource();
    if (prometheus_ != nullptr) ctx.autoscale.signals = prometheus_.get();
  } else if (options_.autoscale_interval.count() > 0) {
    autoscale::PodMetricsScraperOptions so;
    so.interval_ms = options_.autoscale_interval.count();
    so.timeout_ms = options_.scrape_timeout.count();
    so.targets = [this] { return AutoscaleTargets(); };
    so.on_round = [this](const std::vector<std::string>& pools) {
      for (const std::string& key : pools) pool_queue_->Add(key);
    };
    so.clock = &clock_;
    scraper_ = std::make_unique<autoscale::PodMetricsScraper>(std::move(so));
    ctx.autoscale.signals = scraper_.get();
  }
  // Four rounds without a fresh snapshot (a stalled source, members all gone): hold.
  ctx.autoscale.max_signal_age_seconds =
      4.0 * std::chrono::duration<double>(options_.autoscale_interval + options_.scrape_timeout).count();
  ctx.autoscale.memory = autoscale_memory_.get();
  ctx.autoscale.clock = &clock_;
  deployment_reconciler_ = std::make_unique<ModelDeploymentReconciler>(ctx);
  pool_reconciler_ = std::make_unique<ModelPoolReconciler>(ctx);
  auto hooks = [&](const char* name) {
    return metrics_ != nullptr ? metrics::WorkQueueHooks(metrics_, name) : runtime::WorkQueueMetricsHooks{};
  };
  deployment_queue_ = std::make_unique<runtime::WorkQueue>(
      "modeldeployment", clock_, runtime::NewDefaultControllerRateLimiter(clock_), hooks("modeldeployment"));
  pool_queue_ = std::make_unique<runtime::WorkQueue>(
      "modelpool", clock_, runtime::NewDefaultControllerRateLimiter(clock_), hooks("modelpool"));

  // Only our children are cached (label selectors); a same-named object of someone else's is
  // found by the store's live GET fallback and refused.
  const std::string ours = "app.kubernetes.io/managed-by=tandem-controller";
  AddInformer(static_cast<int>(Kind::kModelDeployment), "");
  AddInformer(static_cast<int>(Kind::kModelPool), "");
  for (Kind kind : {Kind::kStatefulSet, Kind::kService, Kind::kConfigMap, Kind::kDeployment,
                    Kind::kPodDisruptionBudget}) {
    AddInformer(static_cast<int>(kind), ours);
  }
  // Pods of our deployments: the pools' members (readiness, scheduling) and the routers, whose
  // latency histograms the autoscaler's scraper reads.
  AddInformer(static_cast<int>(Kind::kPod), std::string(kDeploymentLabel));
}

std::unique_ptr<autoscale::PrometheusSignalSource> Manager::NewPrometheusSource() {
  autoscale::PrometheusSignalSourceOptions po;
  po.url = options_.prometheus_url;
  if (!options_.prometheus_selector.empty()) po.selector = options_.prometheus_selector;
  if (!options_.prometheus_latency_selector.empty())
    po.latency_selector = options_.prometheus_latency_selector;
  po.rate_window = options_.prometheus_rate_window;
  po.interval_ms = options_.autoscale_interval.count();
  po.timeout_ms = options_.scrape_timeout.count();
  po.pools = [this] { return AutoscalePools(); };
  po.on_round = [this](const std::vector<std::string>& pools) {
    for (const std::string& key : pools) pool_queue_->Add(key);
  };
  po.clock = &clock_;
  StatusOr<std::unique_ptr<autoscale::PrometheusSignalSource>> source =
      autoscale::PrometheusSignalSource::New(std::move(po));
  if (!source.ok()) {
    TANDEM_LOG(Error) << "autoscaler: the Prometheus signal source: " << source.status().ToString()
                      << "; builtin-autoscaled pools hold";
    return nullptr;
  }
  return std::move(source).value();
}

void Manager::AddInformer(int kind_index, const std::string& label_selector) {
  Kind kind = static_cast<Kind>(kind_index);
  runtime::InformerOptions o;
  o.resource = ResourceOf(kind);
  o.namespace_name = options_.watch_namespace;
  o.label_selector = label_selector;
  o.clock = &clock_;
  auto informer = std::make_unique<runtime::Informer>(
      options_.informer_client != nullptr ? options_.informer_client : client_, o);
  store_->SetInformer(kind, informer.get());
  if (kind == Kind::kModelDeployment) deployment_informer_ = informer.get();
  if (kind == Kind::kModelPool) pool_informer_ = informer.get();
  auto route = [this, kind](const runtime::ObjectPtr& obj) {
    if (obj == nullptr) return;
    std::string owner_kind, owner_key;
    ControllerOwner(*obj, &owner_kind, &owner_key);
    if (kind == Kind::kModelDeployment) {
      deployment_queue_->Add(ObjectKey(*obj));
      return;
    }
    if (kind == Kind::kModelPool) pool_queue_->Add(ObjectKey(*obj));
    if (kind == Kind::kPod) {
      // Pods belong to the pool's StatefulSet, which is named after the pool; the quality gate's
      // eval Pod to its ModelDeployment.
      if (owner_kind == "StatefulSet") pool_queue_->Add(owner_key);
      if (owner_kind == "ModelDeployment") deployment_queue_->Add(owner_key);
      return;
    }
    if (owner_kind == "ModelDeployment") deployment_queue_->Add(owner_key);
    if (owner_kind == "ModelPool") pool_queue_->Add(owner_key);
  };
  runtime::EventHandlers handlers;
  handlers.on_add = route;
  handlers.on_update = [route](const runtime::ObjectPtr&, const runtime::ObjectPtr& obj) { route(obj); };
  handlers.on_delete = route;
  if (kind == Kind::kModelPool && metrics_ != nullptr) {
    // A deleted pool's replica series would otherwise linger in dashboards.
    handlers.on_delete = [this, route](const runtime::ObjectPtr& obj) {
      route(obj);
      if (obj == nullptr) return;
      FieldReader r(*obj);
      metrics_->ForgetPool(r.String("/spec/deploymentName", ""), r.String("/spec/role", ""));
    };
  }
  informer->AddEventHandlers(std::move(handlers));
  informers_.push_back(std::move(informer));
}

Manager::~Manager() { Stop(); }

std::vector<const runtime::Informer*> Manager::informers() const {
  std::vector<const runtime::Informer*> out;
  for (const auto& informer : informers_) out.push_back(informer.get());
  return out;
}

void Manager::StartInformers() {
  for (auto& informer : informers_) informer->Start();
}

bool Manager::Synced() const {
  for (const auto& informer : informers_) {
    if (!informer->HasSynced()) return false;
  }
  return true;
}

bool Manager::WaitForSync(std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& informer : informers_) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !informer->WaitForSync(left)) return false;
  }
  return true;
}

void Manager::StartWorkers() {
  if (workers_started_.exchange(true) || stopped_.load()) return;
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this] { Worker(deployment_queue_.get(), true); });
    workers_.emplace_back([this] { Worker(pool_queue_.get(), false); });
  }
  if (options_.resync_period.count() > 0) {
    resync_thread_ = std::thread([this] {
      while (resync_sleeper_->SleepFor(options_.resync_period)) Resync();
    });
  }
  if (scraper_ != nullptr) scraper_->Start();
  if (prometheus_ != nullptr) prometheus_->Start();
}

std::vector<autoscale::PodTarget> Manager::AutoscaleTargets() const {
  std::vector<autoscale::PodTarget> targets;
  // The ready, not terminating pods of `selector` with an IP, as targets of `pool_key`.
  auto add = [&](const std::string& ns, const json& selector, const std::string& pool_key,
                 bool latency_only) {
    StatusOr<std::vector<json>> pods = store_->List(Kind::kPod, ns, selector);
    if (!pods.ok()) return;
    for (const json& pod : *pods) {
      FieldReader r(pod);
      const std::string ip = r.String("/status/podIP", "");
      if (ip.empty() || !PodReady(pod) || r.String("/metadata/deletionTimestamp", "") != "") continue;
      const bool v6 = ip.find(':') != std::string::npos;
      targets.push_back({pool_key, r.String("/metadata/name", ""),
                         (v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(MetricsPort(pod)), latency_only});
    }
  };
  for (const runtime::ObjectPtr& obj : pool_informer_->List()) {
    StatusOr<ModelPoolSpec> spec = ParseModelPoolSpec(*obj, options_.plan);
    if (!spec.ok() || !spec->pool.autoscale.Builtin()) continue;
    const std::string pool_key = spec->ns + "/" + spec->name;
    add(spec->ns, PoolSelector(spec->deployment_name, spec->pool.role), pool_key, false);
    // The deployment's routers observe its TTFT and ITL (the members' histograms stay empty).
    add(spec->ns,
        json{{std::string(kDeploymentLabel), spec->deployment_name},
             {std::string(kComponentLabel), "router"}},
        pool_key, true);
  }
  return targets;
}

std::vector<autoscale::PoolQueryTarget> Manager::AutoscalePools() const {
  std::vector<autoscale::PoolQueryTarget> pools;
  for (const runtime::ObjectPtr& obj : pool_informer_->List()) {
    StatusOr<ModelPoolSpec> spec = ParseModelPoolSpec(*obj, options_.plan);
    if (!spec.ok() || !spec->pool.autoscale.Builtin()) continue;
    // The agents' labels: deployment is TANDEM_DEPLOYMENT, pool is TANDEM_POOL, the role.
    pools.push_back({spec->ns + "/" + spec->name, {spec->ns, spec->deployment_name, spec->pool.role}});
  }
  return pools;
}

void Manager::Resync() {
  // As client-go's informer resync: every cached object goes through the queue again, where a
  // key already waiting is not added twice.
  for (const runtime::ObjectPtr& obj : deployment_informer_->List()) deployment_queue_->Add(ObjectKey(*obj));
  if (metrics_ != nullptr) metrics_->CountResync("modeldeployment");
  for (const runtime::ObjectPtr& obj : pool_informer_->List()) pool_queue_->Add(ObjectKey(*obj));
  if (metrics_ != nullptr) metrics_->CountResync("modelpool");
}

void Manager::Worker(runtime::WorkQueue* queue, bool deployments) {
  const char* name = deployments ? "modeldeployment" : "modelpool";
  while (std::optional<std::string> key = queue->Get()) {
    int64_t start = clock_.NowNanos();
    Status s;
    try {
      s = deployments ? deployment_reconciler_->Reconcile(*key) : pool_reconciler_->Reconcile(*key);
    } catch (const std::exception& e) {
      // The edge of nlohmann::json: a malformed object must not take the process down.
      s = Status::Internal(std::string("unexpected object shape: ") + e.what());
    }
    double seconds = static_cast<double>(clock_.NowNanos() - start) * 1e-9;
    std::string_view result = ResultOf(s);
    if (metrics_ != nullptr) metrics_->ObserveReconcile(name, result, seconds);
    ++reconciles_;
    if (s.ok()) {
      queue->Forget(*key);
    } else {
      if (result == metrics::kResultError) {
        TANDEM_LOG(Warning) << name << " " << *key << ": " << s.ToString();
      } else {
        TANDEM_LOG(Debug) << name << " " << *key << " requeued: " << s.ToString();
      }
      queue->AddRateLimited(*key);
    }
    queue->Done(*key);
  }
}

void Manager::Stop() {
  if (stopped_.exchange(true)) return;
  // Before the queues: their rounds add to them.
  if (scraper_ != nullptr) scraper_->Stop();
  if (prometheus_ != nullptr) prometheus_->Stop();
  store_->Interrupt();
  resync_sleeper_->Interrupt();
  if (resync_thread_.joinable()) resync_thread_.join();
  deployment_queue_->ShutDown();
  pool_queue_->ShutDown();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  for (auto& informer : informers_) informer->Stop();
}

}  // namespace tandem::controller::reconcile
