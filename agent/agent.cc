#include "agent/agent.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "agent/api_server.h"
#include "agent/decode_service.h"
#include "agent/engine_host.h"
#include "agent/grpc_util.h"
#include "agent/http/http_server.h"
#include "agent/local_backend.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/prefill_service.h"
#include "agent/router.h"
#include "common/logging.h"
#include "engine/model/model_dir.h"

namespace tandem::agent {

namespace runtime = engine::runtime;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kStatsPeriod = std::chrono::milliseconds(250);
constexpr runtime::RequestId kProbeCallId = ~runtime::RequestId{0} - 1;  // never a live request

std::string ServedModelName(const AgentConfig& c) {
  if (!c.served_model_name.empty()) return c.served_model_name;
  if (!c.model_path.empty()) {
    std::string path = c.model_path;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }
  return "dummy-" + c.dummy_preset;
}

// AgentStatus for prefill and decode members: what routers choose by.
class StatusService final : public v1::AgentStatus::Service {
 public:
  StatusService(Agent::Impl* impl) : impl_(impl) {}
  grpc::Status GetStatus(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusResponse* out) override;

 private:
  Agent::Impl* impl_;
};

}  // namespace

struct Agent::Impl {
  AgentConfig config;
  std::unique_ptr<metrics::AgentMetrics> metrics;
  std::unique_ptr<EngineHost> host;
  std::unique_ptr<LocalBackend> local;
  std::unique_ptr<Router> router;
  // Router: the tokenizer of the model directory (no weights).
  std::unique_ptr<engine::model::ModelTokens> tokens;
  std::unique_ptr<ApiServer> api;
  std::unique_ptr<http::HttpServer> http;
  std::unique_ptr<http::HttpServer> ops;
  std::unique_ptr<PrefillService> prefill;
  std::unique_ptr<DecodeService> decode;
  std::unique_ptr<StatusService> status;
  std::unique_ptr<grpc::Server> grpc;
  int grpc_port = 0;
  std::atomic<bool> admitting{true};

  // Background: stats into metrics, readiness probes.
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  Clock::time_point probe_started{}, probe_ok{};                                           // guarded by mu
  bool probe_running = false;                                                              // guarded by mu
  Status probe_error = Status::Unavailable("the first readiness probe has not finished");  // guarded by mu
  std::thread stats_thread, probe_thread;
  bool shut_down = false;
  bool draining = false;               // guarded by mu
  Clock::time_point drain_deadline{};  // guarded by mu: the drain's start + shutdown_grace_ms

  // Stops admitting (new requests get 503 / UNAVAILABLE, readiness and GetStatus turn false) and
  // starts a grace period of grace_ms; later calls keep the first deadline. Returns it.
  Clock::time_point BeginDrain(int64_t grace_ms) {
    std::lock_guard<std::mutex> lock(mu);
    if (!draining) {
      draining = true;
      drain_deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(grace_ms, 0));
      admitting = false;
      if (prefill) prefill->StopAdmitting();
      if (decode) decode->StopAdmitting();
      TANDEM_LOG(Info) << "draining: " << InFlight() << " requests in flight, grace " << grace_ms << " ms";
    }
    return drain_deadline;
  }

  // Waits until nothing is in flight or `deadline`; the requests still in flight.
  int64_t WaitIdle(Clock::time_point deadline) const {
    while (InFlight() > 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return InFlight();
  }

  int64_t InFlight() const {
    int64_t n = 0;
    if (local) n += local->in_flight();
    if (router) n += router->in_flight();
    // An API request also counts until its response is written: its backend stream ends a little
    // before the last bytes leave, and Shutdown's http->Stop() cuts every connection.
    if (http) n = std::max(n, http->active_requests());
    if (prefill) n += prefill->in_flight();
    if (decode) n += decode->in_flight();
    return n;
  }

  Status Ready() {
    if (!admitting) return Status::Unavailable("draining");
    if (router) return router->Ready();
    std::lock_guard<std::mutex> lock(mu);
    if (probe_running && Clock::now() - probe_started > std::chrono::milliseconds(config.probe_timeout_ms)) {
      return Status::Unavailable(
          "the readiness probe has not come back for " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - probe_started).count()) +
          " s: the engine is wedged");
    }
    return probe_error;
  }

  // One probe through the engine; OK when it came back.
  Status Probe() {
    runtime::EngineLoop& loop = host->loop();
    if (config.role == Role::kDecode) {
      Status st = loop.Cancel(kProbeCallId);  // answered by the step thread between steps
      return st.code() == StatusCode::kNotFound ? Status::Ok() : st;
    }
    runtime::Request req;
    req.prompt = {1, 2, 3, 4};
    req.params.max_tokens = 1;
    req.params.temperature = 0.0f;
    auto channel = std::make_shared<OutputChannel>();
    ASSIGN_OR_RETURN(runtime::RequestId id, loop.Submit(req, OutputChannel::SinkFor(channel)));
    const auto give_up = Clock::now() + std::chrono::milliseconds(config.probe_timeout_ms);
    while (Clock::now() < give_up) {
      std::optional<runtime::RequestOutput> out = channel->Pop(std::chrono::milliseconds(50));
      if (!out) continue;
      if (!out->new_tokens.empty()) {
        if (config.role == Role::kPrefill) (void)loop.Cancel(id);
        return Status::Ok();
      }
      if (out->finish) {
        return Status::Unavailable("the probe request ended with " +
                                   std::string(runtime::FinishReasonName(*out->finish)) + " " +
                                   out->finish_detail);
      }
    }
    (void)loop.Cancel(id);
    return Status::Unavailable("the probe request produced no token in time");
  }

  void ProbeLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      probe_running = true;
      probe_started = Clock::now();
      lock.unlock();
      Status st = Probe();
      lock.lock();
      probe_running = false;
      probe_error = st;
      if (st.ok()) probe_ok = Clock::now();
      cv.wait_for(lock, std::chrono::milliseconds(config.probe_period_ms), [&] { return stopping; });
    }
  }

  // The router's in-flight requests and the members it polled last.
  void UpdateRouterMetrics() {
    metrics->SetRequests(router->in_flight(), api ? api->admission().counters().queued : 0);
    auto count = [&](metrics::MemberPool pool, const std::vector<MemberStatus>& members) {
      const int64_t ready =
          std::count_if(members.begin(), members.end(), [](const MemberStatus& m) { return m.healthy; });
      metrics->SetRouterMembers(pool, ready, static_cast<int64_t>(members.size()) - ready);
    };
    count(metrics::MemberPool::kPrefill, router->prefill_members());
    count(metrics::MemberPool::kDecode, router->decode_members());
  }

  void StatsLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      lock.unlock();
      if (host) {
        // An idle loop refreshes its snapshot only when it wakes; counters bumped off the step
        // thread (late transfer writes) show up within one period.
        host->loop().Wake();
        metrics->UpdateFromEngine(host->loop().Stats());
      }
      if (router) UpdateRouterMetrics();
      lock.lock();
      cv.wait_for(lock, kStatsPeriod, [&] { return stopping; });
    }
  }

  void Ops(const http::HttpRequest& req, http::ResponseWriter& w) {
    if (req.method != "GET" && req.method != "HEAD") {
      w.Send(405, "text/plain", "method not allowed\n", {{"Allow", "GET"}});
    } else if (req.path == "/metrics") {
      if (host) metrics->UpdateFromEngine(host->loop().Stats());
      if (router) UpdateRouterMetrics();
      w.Send(200, "text/plain; version=0.0.4; charset=utf-8", metrics->Serialize());
    } else if (req.path == "/healthz") {
      w.Send(200, "text/plain", "ok\n");
    } else if (req.path == "/readyz") {
      Status st = Ready();
      w.Send(st.ok() ? 200 : 503, "text/plain", st.ok() ? "ok\n" : st.message() + "\n");
    } else if (req.path == "/drain") {
      // The pod's preStop hook (an httpGet: GET is all it sends). It answers when the agent is
      // idle or the grace period is over; the SIGTERM that follows then stops at once.
      if (req.method == "HEAD") {
        w.Send(405, "text/plain", "GET /drain drains the agent\n", {{"Allow", "GET"}});
        return;
      }
      const int64_t left = WaitIdle(BeginDrain(static_cast<int64_t>(config.shutdown_grace_ms)));
      w.Send(200, "text/plain",
             left == 0 ? std::string("drained\n")
                       : "grace period over with " + std::to_string(left) + " requests in flight\n");
    } else {
      w.Send(404, "text/plain", "not found\n");
    }
  }
};

namespace {

grpc::Status StatusService::GetStatus(grpc::ServerContext*, const v1::StatusRequest*,
                                      v1::StatusResponse* out) {
  out->set_role(std::string(RoleName(impl_->config.role)));
  out->set_ready(impl_->Ready().ok());
  if (impl_->host) {
    const runtime::EngineStats s = impl_->host->loop().Stats();
    out->set_kv_capacity_tokens(s.kv_capacity_tokens);
    out->set_kv_used_tokens(s.kv_used_tokens);
    out->set_running(s.running + s.export_held);
    out->set_waiting(s.waiting + s.imports_in_flight);
    out->set_page_tokens(static_cast<uint32_t>(impl_->host->page_tokens()));
  }
  if (impl_->prefill) {
    for (uint64_t h : impl_->prefill->blocks().Snapshot(4096)) out->add_prefix_blocks(h);
  }
  return grpc::Status::OK;
}

}  // namespace

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Agent::~Agent() { Shutdown(0); }

StatusOr<std::unique_ptr<Agent>> Agent::Start(const AgentConfig& config) {
  RETURN_IF_ERROR(ValidateAgentConfig(config));
  RETURN_IF_ERROR(CheckTransportFiles(TransportOf(config)));
  auto impl = std::make_unique<Impl>();
  Impl& a = *impl;
  a.config = config;
  a.metrics = std::make_unique<metrics::AgentMetrics>(config.deployment, config.pool,
                                                      std::string(RoleName(config.role)));
  const Role role = config.role;

  ApiServerOptions api;
  api.model_name = ServedModelName(config);
  api.default_max_tokens = config.default_max_tokens;
  api.max_inflight = config.max_inflight;
  api.admission.tenant_max_inflight = static_cast<int64_t>(config.tenant_max_inflight);
  api.admission.max_queued_per_tenant = static_cast<int64_t>(config.max_queued_per_tenant);
  api.admission.queue_timeout_ms = static_cast<int64_t>(config.queue_timeout_ms);
  api.admission.weights = config.tenant_weights;
  api.api_keys = config.api_keys;
  api.fault_injection = config.fault_injection;
  api.forward_unknown_tool_calls = config.forward_unknown_tool_calls;
  api.metrics = a.metrics.get();
  Impl* self = impl.get();
  api.admitting = [self] { return self->admitting.load(); };
  if (role == Role::kRouter) {
    if (!config.model_path.empty()) {
      ASSIGN_OR_RETURN(engine::model::ModelConfig mc, engine::model::LoadModelConfig(config.model_path));
      ASSIGN_OR_RETURN(engine::model::ModelTokens tokens,
                       engine::model::LoadModelTokens(config.model_path, mc));
      a.tokens = std::make_unique<engine::model::ModelTokens>(std::move(tokens));
      api.tokenizer = a.tokens->tokenizer.get();
      api.family = a.tokens->chat_family;
      api.max_context_tokens = mc.max_position_embeddings;
    }
    ASSIGN_OR_RETURN(a.router, Router::Start(config, a.metrics.get()));
    api.backend = a.router.get();
    api.count_finished = true;
  } else {
    ASSIGN_OR_RETURN(a.host, EngineHost::Open(config));
    api.tokenizer = a.host->tokenizer();
    api.family = a.host->chat_family();
    api.max_context_tokens = a.host->max_context_tokens();
  }

  if (role == Role::kRouter || role == Role::kStandalone) {
    if (role == Role::kStandalone) {
      a.local = std::make_unique<LocalBackend>(a.host.get());
      api.backend = a.local.get();
    }
    a.api = std::make_unique<ApiServer>(std::move(api));
    http::HttpServerOptions ho;
    ho.host = config.listen_host;
    ho.port = config.http_port;
    ho.max_body_bytes = config.max_body_bytes;
    ho.max_buffered_body_bytes = config.max_buffered_body_bytes;
    ho.header_timeout_ms = static_cast<int64_t>(config.header_timeout_ms);
    ASSIGN_OR_RETURN(a.http,
                     http::HttpServer::Start(ho, [self](const http::HttpRequest& r, http::ResponseWriter& w) {
                       self->api->Handle(r, w);
                     }));
  } else {
    if (role == Role::kPrefill) {
      a.prefill = std::make_unique<PrefillService>(a.host.get(), a.metrics.get(), config);
    } else {
      a.decode = std::make_unique<DecodeService>(a.host.get(), a.metrics.get(), config);
    }
    a.status = std::make_unique<StatusService>(self);
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    builder.AddListeningPort(config.listen_host + ":" + std::to_string(config.grpc_port),
                             ServerCredentialsFor(TransportOf(config)), &a.grpc_port);
    if (a.prefill) builder.RegisterService(a.prefill.get());
    if (a.decode) builder.RegisterService(a.decode.get());
    builder.RegisterService(a.status.get());
    a.grpc = builder.BuildAndStart();
    if (!a.grpc || a.grpc_port == 0) {
      return Status::Unavailable("cannot listen for gRPC on " + config.listen_host + ":" +
                                 std::to_string(config.grpc_port));
    }
  }

  http::HttpServerOptions oo;
  oo.host = config.listen_host;
  oo.port = config.metrics_port;
  oo.header_timeout_ms = 5'000;
  ASSIGN_OR_RETURN(a.ops, http::HttpServer::Start(oo, [self](const http::HttpRequest& r,
                                                             http::ResponseWriter& w) { self->Ops(r, w); }));
  a.stats_thread = std::thread([self] { self->StatsLoop(); });
  if (a.host) a.probe_thread = std::thread([self] { self->ProbeLoop(); });
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

uint16_t Agent::http_port() const { return impl_->http ? impl_->http->port() : 0; }
uint16_t Agent::grpc_port() const { return static_cast<uint16_t>(impl_->grpc_port); }
uint16_t Agent::metrics_port() const { return impl_->ops->port(); }
Status Agent::Ready() const { return impl_->Ready(); }

void Agent::BeginDrain() { (void)impl_->BeginDrain(static_cast<int64_t>(impl_->config.shutdown_grace_ms)); }

void Agent::Shutdown(int64_t grace_ms) {
  Impl& a = *impl_;
  if (a.shut_down) return;
  a.shut_down = true;
  // A drain already begun (GET /drain) keeps its deadline: the grace period counts once.
  if (const int64_t left = a.WaitIdle(a.BeginDrain(grace_ms)); left > 0) {
    TANDEM_LOG(Warning) << left << " requests still in flight at the end of the grace period: failing them";
  }
  // The engine first: every live request gets its abort, so handlers blocked on it return.
  if (a.host) a.host->Stop();
  if (a.http) a.http->Stop();
  if (a.grpc) a.grpc->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (a.router) a.router->Stop();
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.stopping = true;
  }
  a.cv.notify_all();
  if (a.stats_thread.joinable()) a.stats_thread.join();
  if (a.probe_thread.joinable()) a.probe_thread.join();
  if (a.ops) a.ops->Stop();
}

}  // namespace tandem::agent
