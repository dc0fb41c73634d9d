#pragma once
// The executor: makes the cluster hold a planner's desired children, with the fewest writes.
//
// For each desired object: create it when missing; when present and controlled by the owner,
// update it only when a field we manage differs (our labels and annotations, owner reference,
// spec / data) — so a second pass over unchanged objects makes zero writes; when present and not
// controlled by the owner, leave it alone and report it (the reconciler sets Degraded
// ResourceNotOwned). Then delete the owner's children that are no longer desired (pruning).
//
// "Differs" is decided twice over: the child carries an annotation with the hash of what we last
// wrote (so a field we stopped setting is removed), and every field we set must still be there
// with our value (so a change made by someone else is undone). Fields the API server adds
// (defaults, status) never count.

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

inline constexpr std::string_view kAppliedHashAnnotation = "tandem.dev/applied-hash";

// What the executor needs from the cluster. Production reads come from the informer caches and
// writes go to the API server (kube_store.h); tests use an in-memory store that counts writes.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // The live object, NotFound when absent.
  virtual StatusOr<json> Get(Kind kind, const std::string& ns, const std::string& name) = 0;
  // Live objects of `kind` in `ns` carrying every label of `match_labels` ({key: value}).
  virtual StatusOr<std::vector<json>> List(Kind kind, const std::string& ns, const json& match_labels) = 0;
  // Writes. Update sends metadata.resourceVersion (a stale one fails with Aborted); Delete is
  // conditional on `uid` (the object we decided to delete, not a successor of the same name).
  virtual StatusOr<json> Create(Kind kind, const json& object) = 0;
  virtual StatusOr<json> Update(Kind kind, const json& object) = 0;
  // Writes only `object`'s status (the status subresource), conditional on its resourceVersion.
  virtual StatusOr<json> UpdateStatus(Kind kind, const json& object) = 0;
  virtual Status Delete(Kind kind, const std::string& ns, const std::string& name,
                        const std::string& uid) = 0;
};

// Children no longer desired are looked for among these kinds, in `ns`, with these labels.
struct PruneScope {
  std::string ns;
  json match_labels = json::object();
  std::vector<Kind> kinds;
};

struct ApplyResult {
  int created = 0;
  int updated = 0;
  int deleted = 0;
  int unchanged = 0;
  std::vector<std::string> not_owned;      // "StatefulSet ns/name", objects we refused to adopt
  std::vector<std::string> created_names;  // "ModelPool ns/name", for events
  int writes() const { return created + updated + deleted; }
};

// Applies `desired` (each with a controller ownerReference to `owner_uid`) and prunes.
// Errors: the first failed call, after the writes before it (the next reconcile continues);
// Aborted for conflicts (requeue with backoff), AlreadyExists when the cache lagged a create.
StatusOr<ApplyResult> ApplyChildren(ObjectStore& store, std::string_view owner_uid,
                                    const std::vector<DesiredObject>& desired, const PruneScope& prune);

// Pure pieces, exposed for tests.
// `desired` with its create_only fields removed and the applied-hash annotation set.
json Stamped(const DesiredObject& desired);
// True when `live` already holds everything `stamped` sets.
bool UpToDate(const json& live, const json& stamped);
// The object to PUT: `live` with our labels/annotations/owner reference merged in and our
// top-level content (everything but metadata and status) replaced, keeping `live`'s values at
// the create_only paths.
json MergedForUpdate(const json& live, const json& stamped, const std::vector<std::string>& create_only);
// Every field of `want` is in `have` with an equal value (objects recursively; arrays element by
// element and of equal length; scalars equal, integers and floats compared by value).
bool Contains(const json& have, const json& want);

}  // namespace tandem::controller::reconcile
