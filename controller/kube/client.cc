#include "controller/kube/client.h"

#include <mutex>
#include <utility>
#include <vector>

#include "controller/kube/http_client.h"
#include "controller/kube/json_depth.h"
#include "controller/kube/token_source.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "dev"
#endif

namespace tandem::controller::kube {

struct Client::State {
  std::mutex mu;
  std::function<Status()> fence;
  RequestCounts counts;
};

namespace {

struct Call {
  const char* verb;  // for counters: "get", "update", ...
  std::string method;
  std::string path;  // with query
  std::string body;
  std::string content_type;
  int64_t timeout_ms = 0;
  CancelToken* cancel = nullptr;
  bool is_create = false;
};

std::string ObjectName(const Json& object) {
  const Json* meta = object.is_object() && object.contains("metadata") ? &object["metadata"] : nullptr;
  if (meta == nullptr || !meta->is_object() || !meta->contains("name") || !(*meta)["name"].is_string())
    return "";
  return (*meta)["name"].get<std::string>();
}

std::string ObjectNamespace(const Json& object) {
  if (!object.is_object() || !object.contains("metadata")) return "";
  const Json& meta = object["metadata"];
  if (!meta.is_object() || !meta.contains("namespace") || !meta["namespace"].is_string()) return "";
  return meta["namespace"].get<std::string>();
}

// JSON text for a request body. Strings that are not valid UTF-8 (only a caller can build those)
// are sent with U+FFFD instead of making dump() throw.
std::string Dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

uint64_t RequestCounts::Total() const {
  uint64_t total = 0;
  for (const auto& [verb, n] : by_verb) total += n;
  return total;
}

Client::Client(KubeConfig config, ClientOptions options)
    : config_(std::move(config)), options_(std::move(options)), state_(std::make_unique<State>()) {}

Client::~Client() = default;

StatusOr<std::unique_ptr<Client>> Client::New(const KubeConfig& config, ClientOptions options) {
  if (options.user_agent.empty()) options.user_agent = std::string("tandem-controller/") + TANDEM_VERSION;
  HttpClientOptions http;
  http.server = config.server;
  http.ca_pem = config.ca_pem;
  http.insecure_skip_tls_verify = config.insecure_skip_tls_verify;
  http.tls_server_name = config.tls_server_name;
  http.client_cert_pem = config.client_cert_pem;
  http.client_key_pem = config.client_key_pem;
  http.user_agent = options.user_agent;
  http.connect_timeout_ms = options.connect_timeout_ms;
  http.request_timeout_ms = options.request_timeout_ms;
  http.max_idle_connections = options.max_idle_connections;
  StatusOr<std::unique_ptr<HttpClient>> transport = HttpClient::New(std::move(http));
  if (!transport.ok()) return transport.status().WithContext(config.source);
  std::unique_ptr<Client> client(new Client(config, options));
  client->http_ = std::move(transport).value();
  const Clock& clock = options.clock != nullptr ? *options.clock : SteadyClock::Default();
  client->tokens_ = std::make_unique<TokenSource>(config.token, config.token_file,
                                                  options.token_refresh_interval_ms, clock);
  return client;
}

void Client::SetWriteFence(std::function<Status()> fence) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->fence = std::move(fence);
}

RequestCounts Client::Counts() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->counts;
}

Status Client::CheckFence() {
  std::function<Status()> fence;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    fence = state_->fence;
  }
  if (!fence) return Status::Ok();
  Status s = fence();
  if (s.ok()) return s;
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->counts.fenced;
  return Status::FailedPrecondition("write fenced: " + s.message());
}

void Client::Count(const char* verb) {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->counts.by_verb[verb];
}

StatusOr<HttpResponse> Client::Send(const char* verb, HttpRequest& request,
                                    const std::function<bool(std::string_view)>* on_line) {
  const std::string_view v = verb;
  const bool write = v == "create" || v == "update" || v == "patch" || v == "delete";
  for (int attempt = 0;; ++attempt) {
    // Every send of a write, the retry after a 401 included: leadership may have been lost
    // between the two.
    if (write) RETURN_IF_ERROR(CheckFence());
    ASSIGN_OR_RETURN(request.bearer_token, tokens_->Token());
    Count(verb);
    StatusOr<HttpResponse> response =
        on_line != nullptr ? http_->Stream(request, *on_line) : http_->Do(request);
    if (!response.ok()) return response.status().WithContext(request.method + " " + request.target);
    // A rotated token file: read it again and retry once, as client-go does.
    if (response.value().status == 401 && attempt == 0 && tokens_->Invalidate()) continue;
    return response;
  }
}

StatusOr<Json> Client::Execute(const char* verb, const std::string& method, const std::string& target,
                               const std::string& body, const std::string& content_type, int64_t timeout_ms,
                               CancelToken* cancel, bool is_create) {
  HttpRequest request;
  request.method = method;
  request.target = target;
  request.body = body;
  request.content_type = content_type;
  request.timeout_ms = timeout_ms;
  request.cancel = cancel;
  ASSIGN_OR_RETURN(HttpResponse response, Send(verb, request, nullptr));
  const std::string context = method + " " + target;
  if (response.status < 200 || response.status > 299) {
    return StatusFromHttp(response.status, response.body, context, is_create);
  }
  if (response.body.empty()) return Json::object();
  // nlohmann/json parses and copies recursively: a hostile or broken server's deep nesting must
  // be an error, not a stack overflow.
  if (!JsonDepthWithin(response.body, kMaxJsonDepth)) {
    return Status::Internal(context + ": the response nests deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels");
  }
  Json parsed = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::Internal(context + ": the response is not JSON");
  return parsed;
}

StatusOr<Json> Client::Get(const ResourceRef& ref, std::string_view ns, std::string_view name,
                           const CallOptions& call) {
  if (name.empty()) return Status::InvalidArgument("Get " + ref.GroupResource() + ": empty name");
  return Execute("get", "GET", ResourcePath(ref, ns, name), "", "", call.timeout_ms, call.cancel, false);
}

StatusOr<Json> Client::List(const ResourceRef& ref, std::string_view ns, const ListOptions& options) {
  const std::string query = QueryString({
      {"labelSelector", options.label_selector},
      {"fieldSelector", options.field_selector},
      {"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
      {"continue", options.continue_token},
      {"resourceVersion", options.resource_version},
  });
  return Execute("list", "GET", ResourcePath(ref, ns) + query, "", "", options.timeout_ms, options.cancel,
                 false);
}

StatusOr<Json> Client::ListAll(const ResourceRef& ref, std::string_view ns, ListOptions options) {
  Json all;
  Json items = Json::array();
  for (;;) {
    ASSIGN_OR_RETURN(Json page, List(ref, ns, options));
    if (page.contains("items") && page["items"].is_array()) {
      for (Json& item : page["items"]) items.push_back(std::move(item));
    }
    std::string next;
    if (page.contains("metadata") && page["metadata"].is_object()) {
      const Json& meta = page["metadata"];
      if (meta.contains("continue") && meta["continue"].is_string())
        next = meta["continue"].get<std::string>();
    }
    all = std::move(page);
    if (next.empty()) break;
    options.continue_token = next;
    options.resource_version.clear();  // the continue token carries the snapshot
  }
  all["items"] = std::move(items);
  if (all.contains("metadata") && all["metadata"].is_object()) all["metadata"].erase("continue");
  return all;
}

StatusOr<std::string> Client::WriteNamespace(const ResourceRef& ref, std::string_view ns, const Json& object,
                                             const char* verb) {
  if (!ref.namespaced) return std::string();
  if (!ns.empty()) return std::string(ns);
  std::string from_object = ObjectNamespace(object);
  if (from_object.empty()) {
    return Status::InvalidArgument(std::string(verb) + " " + ref.GroupResource() +
                                   ": no namespace given and none in metadata.namespace");
  }
  return from_object;
}

StatusOr<Json> Client::Create(const ResourceRef& ref, std::string_view ns, const Json& object,
                              const CallOptions& call) {
  if (!object.is_object())
    return Status::InvalidArgument("Create " + ref.GroupResource() + ": not an object");
  ASSIGN_OR_RETURN(std::string where, WriteNamespace(ref, ns, object, "Create"));
  Json body = object;
  if (!body.contains("apiVersion")) body["apiVersion"] = ref.ApiVersion();
  if (!body.contains("kind")) body["kind"] = ref.kind;
  return Execute("create", "POST", ResourcePath(ref, where), Dump(body), "application/json", call.timeout_ms,
                 call.cancel, true);
}

StatusOr<Json> Client::Put(const ResourceRef& ref, std::string_view ns, const Json& object,
                           std::string_view subresource, const CallOptions& call) {
  const std::string name = ObjectName(object);
  if (name.empty())
    return Status::InvalidArgument("Update " + ref.GroupResource() + ": metadata.name is empty");
  ASSIGN_OR_RETURN(std::string where, WriteNamespace(ref, ns, object, "Update"));
  Json body = object;
  if (!body.contains("apiVersion")) body["apiVersion"] = ref.ApiVersion();
  if (!body.contains("kind")) body["kind"] = ref.kind;
  return Execute("update", "PUT", ResourcePath(ref, where, name, subresource), Dump(body), "application/json",
                 call.timeout_ms, call.cancel, false);
}

StatusOr<Json> Client::Update(const ResourceRef& ref, std::string_view ns, const Json& object,
                              const CallOptions& call) {
  return Put(ref, ns, object, "", call);
}

StatusOr<Json> Client::UpdateStatus(const ResourceRef& ref, std::string_view ns, const Json& object,
                                    const CallOptions& call) {
  return Put(ref, ns, object, "status", call);
}

StatusOr<Json> Client::Patch(const ResourceRef& ref, std::string_view ns, std::string_view name,
                             const Json& merge_patch, std::string_view subresource, const CallOptions& call) {
  if (name.empty()) return Status::InvalidArgument("Patch " + ref.GroupResource() + ": empty name");
  return Execute("patch", "PATCH", ResourcePath(ref, ns, name, subresource), Dump(merge_patch),
                 "application/merge-patch+json", call.timeout_ms, call.cancel, false);
}

Status Client::Delete(const ResourceRef& ref, std::string_view ns, std::string_view name,
                      const DeleteOptions& options) {
  if (name.empty()) return Status::InvalidArgument("Delete " + ref.GroupResource() + ": empty name");
  Json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (options.grace_period_seconds >= 0) body["gracePeriodSeconds"] = options.grace_period_seconds;
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  StatusOr<Json> result = Execute("delete", "DELETE", ResourcePath(ref, ns, name), Dump(body),
                                  "application/json", options.timeout_ms, options.cancel, false);
  return result.ok() ? Status::Ok() : result.status();
}

}  // namespace tandem::controller::kube
