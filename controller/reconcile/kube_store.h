#pragma once
// The executor's and reconcilers' view of the cluster in production: reads from the informer
// caches (falling back to a live GET when the cache has no such object, so a child created a
// moment ago is not created twice), writes through the Kubernetes client (which leader election
// fences), at most `qps` requests per second with bursts of `burst` (client-go's client-side
// limiter: a token bucket; callers block until their token is due).

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/reconcile/apply.h"

namespace tandem::controller::kube {
class Client;
struct ResourceRef;
}  // namespace tandem::controller::kube
namespace tandem::controller::runtime {
class BucketRateLimiter;
class Informer;
class Sleeper;
}  // namespace tandem::controller::runtime

namespace tandem::controller::reconcile {

// The REST resource of a Kind.
kube::ResourceRef ResourceOf(Kind kind);

class KubeStore : public ObjectStore {
 public:
  // `client` and `clock` must outlive the store. qps <= 0: no limit.
  KubeStore(kube::Client* client, const Clock& clock, double qps = 0, int burst = 1);
  ~KubeStore() override;

  // Wakes and fails (Cancelled) callers waiting for a token, now and later (shutdown).
  void Interrupt();

  // Reads of `kind` come from `informer` (which must outlive the store). REQUIRES: before use.
  void SetInformer(Kind kind, runtime::Informer* informer) { informers_[kind] = informer; }

  StatusOr<json> Get(Kind kind, const std::string& ns, const std::string& name) override;
  StatusOr<std::vector<json>> List(Kind kind, const std::string& ns, const json& match_labels) override;
  StatusOr<json> Create(Kind kind, const json& object) override;
  StatusOr<json> Update(Kind kind, const json& object) override;
  StatusOr<json> UpdateStatus(Kind kind, const json& object) override;
  Status Delete(Kind kind, const std::string& ns, const std::string& name, const std::string& uid) override;

 private:
  Status Throttle();

  kube::Client* const client_;
  std::unique_ptr<runtime::BucketRateLimiter> limiter_;  // null: unlimited
  std::unique_ptr<runtime::Sleeper> sleeper_;
  std::map<Kind, runtime::Informer*> informers_;
};

}  // namespace tandem::controller::reconcile
