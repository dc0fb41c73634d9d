#pragma once
// The Kubernetes REST client: typed-less CRUD, status writes, merge patches, list pagination and
// watch over nlohmann::json objects, on top of HttpClient (keep-alive HTTP/1.1 over TCP or TLS).
//
// Errors follow the project convention (HTTP status -> Status code):
//   400/422 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied, 404 NotFound,
//   409 AlreadyExists on create and Aborted otherwise (update conflicts), 410 OutOfRange (the
//   resourceVersion is too old: relist), 429/5xx and connection failures Unavailable, timeouts
//   DeadlineExceeded, a CancelToken fired Cancelled, a write refused by the write fence
//   FailedPrecondition. Messages carry the verb, the path and the API server's Status message:
//   "PUT /apis/apps/v1/namespaces/ns/statefulsets/a: 409 Conflict: the object has been modified".
//
// Thread-safe: any number of threads may call one Client at once (a small connection pool
// serves them; each Watch holds its own connection while it runs).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "controller/kube/cancel.h"
#include "controller/kube/config.h"
#include "controller/kube/resource.h"

namespace tandem::controller::kube {

using Json = nlohmann::json;

struct ClientOptions {
  std::string user_agent;  // empty: "tandem-controller/<version>"
  int64_t connect_timeout_ms = 10'000;
  int64_t request_timeout_ms = 30'000;  // whole request incl. reading the body (not watches)
  int max_idle_connections = 8;         // keep-alive pool size
  // A token file is re-read at most this often, and at once after a 401 (then the request is
  // retried once with the new token).
  int64_t token_refresh_interval_ms = 60'000;
  // For the token refresh interval; nullptr: SteadyClock. REQUIRES: outlives the Client.
  const Clock* clock = nullptr;
};

// Per-call knobs for the simple verbs.
struct CallOptions {
  int64_t timeout_ms = 0;  // 0: ClientOptions::request_timeout_ms
  CancelToken* cancel = nullptr;
};

struct ListOptions {
  std::string label_selector;    // "app=x,tier in (a,b)"; escaped by the client
  std::string field_selector;    // "metadata.name=x"
  int64_t limit = 0;             // page size; 0: the server's choice (everything)
  std::string continue_token;    // from the previous page's metadata.continue
  std::string resource_version;  // "" most recent; "0" any (cache)
  int64_t timeout_ms = 0;
  CancelToken* cancel = nullptr;
};

struct DeleteOptions {
  std::string propagation_policy;  // "Foreground", "Background", "Orphan"; "" server default
  std::string precondition_uid;    // refuse (409 -> Aborted) unless the object still has this uid
  std::string precondition_resource_version;
  int64_t grace_period_seconds = -1;  // -1: not sent
  int64_t timeout_ms = 0;
  CancelToken* cancel = nullptr;
};

struct WatchOptions {
  std::string resource_version;  // start after this version ("" : from now, with synthetic ADDs)
  bool allow_bookmarks = true;
  int64_t timeout_seconds = 0;  // server-side end of the watch; 0: not sent (server default)
  std::string label_selector;
  std::string field_selector;
};

// One watch event as the API server sends it.
struct WatchEvent {
  std::string type;  // "ADDED", "MODIFIED", "DELETED", "BOOKMARK" ("ERROR" is never delivered)
  Json object;       // the object; for BOOKMARK only metadata.resourceVersion is meaningful
};
// Return false to stop the watch (Watch then returns OK).
using WatchCallback = std::function<bool(const WatchEvent& event)>;

// Requests made so far, by verb ("get", "list", "create", "update", "patch", "delete", "watch"),
// counting retries; plus how many were refused by the write fence (never sent).
struct RequestCounts {
  std::map<std::string, uint64_t> by_verb;
  uint64_t fenced = 0;
  uint64_t Total() const;
};

class HttpClient;
class TokenSource;
struct HttpRequest;
struct HttpResponse;

class Client {
 public:
  // Builds a client for `config` (no request is made). InvalidArgument on a malformed server URL
  // or unusable TLS material (naming which).
  static StatusOr<std::unique_ptr<Client>> New(const KubeConfig& config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // GET one object. `ns` is ignored for cluster-scoped resources.
  StatusOr<Json> Get(const ResourceRef& ref, std::string_view ns, std::string_view name,
                     const CallOptions& call = {});
  // One page: the List object (items, metadata.resourceVersion, metadata.continue). ns "" lists
  // all namespaces.
  StatusOr<Json> List(const ResourceRef& ref, std::string_view ns, const ListOptions& options = {});
  // Follows metadata.continue until the end; returns one List object holding every item, with the
  // last page's metadata.resourceVersion (the snapshot the pages share) and no continue token.
  // OutOfRange when the continue token expired (410): relist.
  StatusOr<Json> ListAll(const ResourceRef& ref, std::string_view ns, ListOptions options = {});

  // Writes go to `ns`, or when it is empty to the object's metadata.namespace (InvalidArgument
  // when both are empty for a namespaced resource).
  // POST; `object` needs metadata.name (or generateName). Sets apiVersion/kind when missing.
  // Returns the created object (with uid, resourceVersion, defaults).
  StatusOr<Json> Create(const ResourceRef& ref, std::string_view ns, const Json& object,
                        const CallOptions& call = {});
  // PUT the whole object; metadata.resourceVersion makes it conditional (409 -> Aborted when
  // stale). The status subresource ignores spec changes and the main resource ignores status
  // (when the CRD has a status subresource), so write them with the matching call.
  StatusOr<Json> Update(const ResourceRef& ref, std::string_view ns, const Json& object,
                        const CallOptions& call = {});
  StatusOr<Json> UpdateStatus(const ResourceRef& ref, std::string_view ns, const Json& object,
                              const CallOptions& call = {});
  // PATCH with application/merge-patch+json (RFC 7386: null deletes a key). `subresource` is ""
  // or e.g. "status" / "scale". Returns the patched object.
  StatusOr<Json> Patch(const ResourceRef& ref, std::string_view ns, std::string_view name,
                       const Json& merge_patch, std::string_view subresource = "",
                       const CallOptions& call = {});
  // DELETE. OK when the server accepted it (the object may live on while finalizers run);
  // NotFound when it is already gone; Aborted when a precondition failed.
  Status Delete(const ResourceRef& ref, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});

  // Streams watch events to `on_event` as they arrive, blocking until:
  //   on_event returns false -> OK;  the server ends the watch (timeout_seconds) -> OK;
  //   an ERROR event with code 410, or HTTP 410 -> OutOfRange (relist);
  //   another ERROR event -> its code mapped as above;  the stream drops -> Unavailable;
  //   `cancel` fires -> Cancelled;  HTTP errors -> mapped as above.
  // There is no read timeout while events flow; the watch as a whole ends at timeout_seconds plus
  // the request timeout when timeout_seconds > 0.
  Status Watch(const ResourceRef& ref, std::string_view ns, const WatchOptions& options,
               const WatchCallback& on_event, CancelToken* cancel = nullptr);

  // Installs the write fence: Create, Update, UpdateStatus, Patch and Delete first call it and,
  // when it returns an error, fail with FailedPrecondition("write fenced: <its message>") without
  // sending anything. Leader election installs one that fails once the lease is lost. An empty
  // function removes the fence. Thread-safe; the fence is called without client locks held.
  void SetWriteFence(std::function<Status()> fence);

  RequestCounts Counts() const;
  const KubeConfig& config() const { return config_; }

 private:
  Client(KubeConfig config, ClientOptions options);

  Status CheckFence();
  void Count(const char* verb);
  // Sends with the current token; after a 401 with a rotated token file, once more. A write
  // (create, update, patch, delete) checks the write fence before every send.
  StatusOr<HttpResponse> Send(const char* verb, HttpRequest& request,
                              const std::function<bool(std::string_view)>* on_line);
  StatusOr<Json> Execute(const char* verb, const std::string& method, const std::string& target,
                         const std::string& body, const std::string& content_type, int64_t timeout_ms,
                         CancelToken* cancel, bool is_create);
  StatusOr<std::string> WriteNamespace(const ResourceRef& ref, std::string_view ns, const Json& object,
                                       const char* verb);
  StatusOr<Json> Put(const ResourceRef& ref, std::string_view ns, const Json& object,
                     std::string_view subresource, const CallOptions& call);

  KubeConfig config_;
  ClientOptions options_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<TokenSource> tokens_;
  struct State;  // counters and the write fence, behind a mutex
  std::unique_ptr<State> state_;
};

// HTTP status code + response body -> Status, by the convention above. `is_create` picks
// AlreadyExists for 409. The body's Kubernetes Status message (or the start of a non-JSON body)
// becomes the message, after `context`. Exposed for tests and for the watch ERROR event mapping.
Status StatusFromHttp(int http_status, std::string_view body, std::string_view context,
                      bool is_create = false);

}  // namespace tandem::controller::kube
