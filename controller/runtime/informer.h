#pragma once
// An informer for one resource: keeps a local cache of the objects the API server holds (in one
// namespace or all, optionally filtered by a label selector) and tells event handlers what
// changed, like client-go's SharedIndexInformer.
//
// Protocol: List (paginated) -> Watch from the list's resourceVersion with bookmarks. When a
// watch ends or drops, it resumes from the last resourceVersion seen (an event or a bookmark).
// When the server answers 410 Gone (that version is no longer in its history) it relists and
// diffs the list against the cache, delivering adds, updates and deletes for what changed while
// it was away. Errors back off exponentially with jitter on the injected clock.
//
// Handlers run on the informer's thread, after the cache reflects the change and without cache
// locks held (they may read the cache); keep them quick (enqueue a key). Cache reads are
// thread-safe and return shared immutable snapshots of objects.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "controller/kube/resource.h"

namespace tandem::controller::kube {
class Client;
class CancelToken;
}  // namespace tandem::controller::kube

namespace tandem::controller::runtime {

class Sleeper;

// An immutable cached object, shared with the cache.
using ObjectPtr = std::shared_ptr<const nlohmann::json>;

// "namespace/name", or "name" for cluster-scoped objects (and objects without a namespace): the
// key work queues carry. Empty when the object has no metadata.name.
std::string ObjectKey(const nlohmann::json& object);
// Splits a key back into namespace ("" when none) and name.
void SplitObjectKey(const std::string& key, std::string* ns, std::string* name);

struct InformerOptions {
  kube::ResourceRef resource;
  std::string namespace_name;  // "": all namespaces (always "" for cluster-scoped resources)
  std::string label_selector;  // "": everything
  int64_t page_size = 500;     // list page size (limit/continue)
  // Each watch asks the server to end it after this long (then it resumes); 0: server default.
  int64_t watch_timeout_s = 300;
  // Backoff between failed attempts: initial doubling to max, times a random factor in
  // [1, 1 + jitter); reset by a successful list or a watch that delivered events.
  std::chrono::nanoseconds initial_backoff = std::chrono::milliseconds(200);
  std::chrono::nanoseconds max_backoff = std::chrono::seconds(30);
  double jitter = 0.5;
  const Clock* clock = nullptr;  // nullptr: SteadyClock::Default()
};

// Each may be empty. on_update gets the cached object before and after; it is delivered only when
// the resourceVersion changed. on_delete gets the last object the cache held (after a relist,
// possibly older than the object's final state, like client-go's DeletedFinalStateUnknown).
struct EventHandlers {
  std::function<void(const ObjectPtr& obj)> on_add;
  std::function<void(const ObjectPtr& old_obj, const ObjectPtr& new_obj)> on_update;
  std::function<void(const ObjectPtr& obj)> on_delete;
};

// Counters since construction, for tests and metrics.
struct InformerStats {
  int64_t lists = 0;         // full lists completed (the first one included)
  int64_t relists = 0;       // lists after the first (410 Gone or a failed list)
  int64_t resumes = 0;       // watches restarted from the last resourceVersion
  int64_t watch_events = 0;  // events received, bookmarks included
  int64_t errors = 0;        // failed lists and watches that ended in an error
  std::string last_resource_version;
  Status last_error;
};

class Informer {
 public:
  // `client` must outlive the informer; it is used for reads only.
  Informer(kube::Client* client, InformerOptions options);
  // Stops and joins.
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // REQUIRES: before Start/Run.
  void AddEventHandlers(EventHandlers handlers);

  // Runs the list/watch loop on a new thread. REQUIRES: called at most once.
  void Start();
  // Runs the loop on the calling thread until Stop(). REQUIRES: at most once, and not with Start.
  void Run();
  // Ends the loop (cancels a blocked list or watch) and joins the Start thread. Idempotent.
  void Stop();

  // True once the first list has been applied to the cache and its adds delivered.
  bool HasSynced() const;
  // Blocks until HasSynced() or `timeout` of real time passes or Stop(); returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // Cache reads. Get returns nullptr when absent; ns is "" for cluster-scoped objects.
  ObjectPtr Get(const std::string& ns, const std::string& name) const;
  ObjectPtr GetByKey(const std::string& key) const;
  std::vector<ObjectPtr> List() const;                                // ordered by key
  std::vector<ObjectPtr> ListNamespace(const std::string& ns) const;  // ordered by key
  // Objects with an ownerReference whose uid is `owner_uid`, ordered by key.
  std::vector<ObjectPtr> ListByOwner(const std::string& owner_uid) const;
  std::vector<std::string> ListKeys() const;

  InformerStats Stats() const;
  const InformerOptions& options() const { return options_; }

 private:
  // One change to deliver once the cache lock is released.
  struct Delta {
    enum Kind { kAdd, kUpdate, kDelete } kind;
    ObjectPtr old_obj;
    ObjectPtr new_obj;
  };

  Status ListAndReplace();                                         // lists and diffs into the cache
  Status WatchOnce(bool* made_progress);                           // one watch from last_rv_
  void Upsert(ObjectPtr obj, std::vector<Delta>* deltas);          // REQUIRES: mu_ held
  void Erase(const std::string& key, std::vector<Delta>* deltas);  // REQUIRES: mu_ held
  void Deliver(const std::vector<Delta>& deltas);
  std::chrono::nanoseconds NextBackoff();
  void RecordError(const Status& status);

  kube::Client* const client_;
  const InformerOptions options_;
  const Clock& clock_;
  std::vector<EventHandlers> handlers_;
  std::unique_ptr<kube::CancelToken> cancel_;
  std::unique_ptr<Sleeper> sleeper_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> started_{false};

  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  std::map<std::string, ObjectPtr> objects_;                  // by key
  std::map<std::string, std::set<std::string>> owner_index_;  // owner uid -> keys
  bool synced_ = false;
  std::string last_rv_;
  InformerStats stats_;
  std::chrono::nanoseconds backoff_{0};
  uint64_t rng_state_;
};

}  // namespace tandem::controller::runtime
