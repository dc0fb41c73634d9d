#include "controller/reconcile/kube_store.h"

#include "controller/kube/client.h"
#include "controller/runtime/clock_wait.h"
#include "controller/runtime/informer.h"
#include "controller/runtime/rate_limiter.h"

namespace tandem::controller::reconcile {
namespace {

std::string Meta(const json& object, const char* field) {
  return FieldReader(object).String(std::string("/metadata/") + field, "");
}

bool HasLabels(const json& object, const json& match_labels) {
  const json* labels = FieldReader(object).Object("/metadata/labels");
  if (labels == nullptr) return match_labels.empty();
  return Contains(*labels, match_labels);
}

}  // namespace

kube::ResourceRef ResourceOf(Kind kind) {
  const KindInfo& info = InfoOf(kind);
  return kube::ResourceRef{std::string(info.group), std::string(info.version), std::string(info.resource),
                           std::string(info.kind), info.namespaced};
}

KubeStore::KubeStore(kube::Client* client, const Clock& clock, double qps, int burst)
    : client_(client), sleeper_(std::make_unique<runtime::Sleeper>(clock)) {
  if (qps > 0) limiter_ = std::make_unique<runtime::BucketRateLimiter>(clock, qps, burst < 1 ? 1 : burst);
}

KubeStore::~KubeStore() = default;

void KubeStore::Interrupt() { sleeper_->Interrupt(); }

Status KubeStore::Throttle() {
  if (limiter_ == nullptr) return Status::Ok();
  std::chrono::nanoseconds wait = limiter_->When("");
  if (wait.count() > 0 && !sleeper_->SleepFor(wait)) return Status::Cancelled("shutting down");
  return Status::Ok();
}

StatusOr<json> KubeStore::Get(Kind kind, const std::string& ns, const std::string& name) {
  auto it = informers_.find(kind);
  if (it != informers_.end()) {
    runtime::ObjectPtr cached = it->second->Get(ns, name);
    if (cached != nullptr) return *cached;
  }
  RETURN_IF_ERROR(Throttle());
  return client_->Get(ResourceOf(kind), ns, name);
}

StatusOr<std::vector<json>> KubeStore::List(Kind kind, const std::string& ns, const json& match_labels) {
  std::vector<json> out;
  auto it = informers_.find(kind);
  if (it != informers_.end()) {
    for (const runtime::ObjectPtr& obj : it->second->ListNamespace(ns)) {
      if (HasLabels(*obj, match_labels)) out.push_back(*obj);
    }
    return out;
  }
  kube::ListOptions options;
  for (auto l = match_labels.begin(); l != match_labels.end(); ++l) {
    if (!options.label_selector.empty()) options.label_selector += ",";
    options.label_selector += l.key() + "=" + l.value().get<std::string>();
  }
  RETURN_IF_ERROR(Throttle());
  StatusOr<json> list = client_->ListAll(ResourceOf(kind), ns, options);
  if (!list.ok()) return list.status();
  for (const json& item : list->value("items", json::array())) out.push_back(item);
  return out;
}

StatusOr<json> KubeStore::Create(Kind kind, const json& object) {
  RETURN_IF_ERROR(Throttle());
  return client_->Create(ResourceOf(kind), Meta(object, "namespace"), object);
}

StatusOr<json> KubeStore::Update(Kind kind, const json& object) {
  RETURN_IF_ERROR(Throttle());
  return client_->Update(ResourceOf(kind), Meta(object, "namespace"), object);
}

StatusOr<json> KubeStore::UpdateStatus(Kind kind, const json& object) {
  RETURN_IF_ERROR(Throttle());
  return client_->UpdateStatus(ResourceOf(kind), Meta(object, "namespace"), object);
}

Status KubeStore::Delete(Kind kind, const std::string& ns, const std::string& name, const std::string& uid) {
  kube::DeleteOptions options;
  options.propagation_policy = "Background";
  options.precondition_uid = uid;
  RETURN_IF_ERROR(Throttle());
  return client_->Delete(ResourceOf(kind), ns, name, options);
}

}  // namespace tandem::controller::reconcile
