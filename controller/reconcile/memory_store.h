#pragma once
// An in-memory ObjectStore for tests: assigns uids and resourceVersions, refuses stale updates
// (Aborted) and duplicate creates (AlreadyExists), adds a server-style default to every object
// it stores (so "fields the server adds never count" is exercised), and counts writes.
// Not thread-safe.

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "controller/reconcile/apply.h"

namespace tandem::controller::reconcile {

class MemoryStore : public ObjectStore {
 public:
  StatusOr<json> Get(Kind kind, const std::string& ns, const std::string& name) override;
  StatusOr<std::vector<json>> List(Kind kind, const std::string& ns, const json& match_labels) override;
  StatusOr<json> Create(Kind kind, const json& object) override;
  StatusOr<json> Update(Kind kind, const json& object) override;
  StatusOr<json> UpdateStatus(Kind kind, const json& object) override;
  Status Delete(Kind kind, const std::string& ns, const std::string& name, const std::string& uid) override;

  // Puts an object as if someone else wrote it (no write counted). Returns it as stored.
  json Seed(Kind kind, json object);
  // Changes a stored object behind the executor's back (no write counted).
  json* Mutable(Kind kind, const std::string& ns, const std::string& name);

  int writes() const { return creates + updates + status_updates + deletes; }
  int creates = 0;
  int updates = 0;
  int status_updates = 0;
  int deletes = 0;
  int fail_next_updates = 0;  // > 0: the next updates fail with Aborted (a conflict)

 private:
  using Key = std::tuple<Kind, std::string, std::string>;
  json Store(Kind kind, json object);
  std::map<Key, json> objects_;
  int64_t next_version_ = 1;
};

}  // namespace tandem::controller::reconcile
