#include "agent/router.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <deque>
#include <fstream>
#include <set>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include "agent/prefix_blocks.h"
#include "agent/wire.h"
#include "common/logging.h"
#include "proto/tandem.grpc.pb.h"

namespace tandem::agent {

namespace runtime = engine::runtime;

namespace {

constexpr int64_t kStatusTimeoutMs = 1'000;
constexpr int64_t kGenerateTimeoutMs = 3'600'000;
// Pairs tried per request: two members of a pool draining at once (a scale-down by two) still
// leave the third attempt a ready one.
constexpr int kMaxAttempts = 3;
constexpr size_t kMaxMembersFileBytes = 1 << 20;

// Load of a member as the router sees it: its own queue plus what this router sent it since.
int64_t Load(const MemberStatus& m) { return static_cast<int64_t>(m.running + m.waiting) + m.routed; }

bool Retryable(const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kDataLoss:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kUnknown:
    case StatusCode::kInternal:
    case StatusCode::kResourceExhausted: return true;
    default: return false;
  }
}

// A request on a (prefill, decode) pair: the first event came with the prefill answer; a reader
// thread moves the decode member's stream into a queue so Next can wait with a timeout.
class RemoteStream : public GenerationStream {
 public:
  using Done = std::function<void()>;
  RemoteStream(std::unique_ptr<grpc::ClientContext> ctx,
               std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader, StreamEvent first,
               int64_t cached, Done done)
      : ctx_(std::move(ctx)), reader_(std::move(reader)), cached_(cached), done_(std::move(done)) {
    queue_.push_back(std::move(first));
    thread_ = std::thread([this] { ReadLoop(); });
  }
  ~RemoteStream() override {
    ctx_->TryCancel();
    thread_.join();
    done_();
  }

  StatusOr<std::optional<StreamEvent>> Next(int64_t timeout_ms) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return !queue_.empty() || ended_; })) {
      return std::optional<StreamEvent>();
    }
    if (!queue_.empty()) {
      StatusOr<StreamEvent> e = std::move(queue_.front());
      queue_.pop_front();
      if (!e.ok()) return e.status();
      // What piled up goes out as one piece (one SSE write instead of many).
      while (!e->finish && !queue_.empty() && queue_.front().ok()) {
        StreamEvent next = std::move(*queue_.front());
        queue_.pop_front();
        MergeEvent(*e, std::move(next));
      }
      return std::optional<StreamEvent>(std::move(*e));
    }
    return end_status_.ok() ? Status::Internal("the decode member ended the stream without a finish")
                            : end_status_;
  }

  void Cancel() override { ctx_->TryCancel(); }
  int64_t cached_tokens() const override { return cached_; }

 private:
  void ReadLoop() {
    v1::GenerateEvent event;
    bool finished = false;
    while (!finished && reader_->Read(&event)) {
      StatusOr<StreamEvent> e = event.has_tokens()
                                    ? FromProto(event.tokens())
                                    : StatusOr<StreamEvent>(Status::Internal("a second reservation"));
      if (e.ok() && e->finish) finished = true;
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(e));
      cv_.notify_one();
    }
    if (!finished) ctx_->TryCancel();
    grpc::Status st = reader_->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    if (!finished) {
      end_status_ = st.ok() ? Status::Internal("the decode stream ended without a finish")
                            : FromGrpc(st, "decode member");
      if (end_status_.code() == StatusCode::kCancelled) end_status_ = Status::Cancelled("cancelled");
    }
    cv_.notify_all();
  }

  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader_;
  int64_t cached_;
  Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StatusOr<StreamEvent>> queue_;
  bool ended_ = false;
  Status end_status_;
  std::thread thread_;
};

// A request that ended with its first token (answered by the prefill member alone).
class FinishedStream : public GenerationStream {
 public:
  FinishedStream(StreamEvent event, int64_t cached) : event_(std::move(event)), cached_(cached) {}
  StatusOr<std::optional<StreamEvent>> Next(int64_t) override {
    if (done_) return Status::Internal("the stream has ended");
    done_ = true;
    return std::optional<StreamEvent>(std::move(event_));
  }
  void Cancel() override {}
  int64_t cached_tokens() const override { return cached_; }

 private:
  StreamEvent event_;
  int64_t cached_;
  bool done_ = false;
};

}  // namespace

int PickPrefill(const std::vector<MemberStatus>& members, const std::vector<uint64_t>& prompt_blocks,
                const std::unordered_set<std::string>& exclude) {
  int best = -1;
  size_t best_match = 0;
  int64_t best_load = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const MemberStatus& m = members[i];
    if (!m.healthy || exclude.count(m.endpoint) != 0) continue;
    const size_t match = MatchedBlocks(prompt_blocks, m.prefix_blocks);
    const int64_t load = Load(m);
    // Affinity first; but a member far busier than another (by more than the blocks it saves) loses.
    const bool better = best < 0 ||
                        static_cast<int64_t>(match) - load > static_cast<int64_t>(best_match) - best_load ||
                        (static_cast<int64_t>(match) - load == static_cast<int64_t>(best_match) - best_load &&
                         match > best_match);
    if (better) {
      best = static_cast<int>(i);
      best_match = match;
      best_load = load;
    }
  }
  return best;
}

int PickDecode(const std::vector<MemberStatus>& members, const std::unordered_set<std::string>& exclude) {
  int best = -1;
  double best_score = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const MemberStatus& m = members[i];
    if (!m.healthy || exclude.count(m.endpoint) != 0) continue;
    const double usage = m.kv_capacity_tokens == 0 ? 1.0
                                                   : static_cast<double>(m.kv_used_tokens) /
                                                         static_cast<double>(m.kv_capacity_tokens);
    // KV occupancy (0..1, weighted like 8 queued requests) plus the queue.
    const double score = usage * 8.0 + static_cast<double>(Load(m));
    if (best < 0 || score < best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}

StatusOr<std::vector<std::string>> ResolveService(const std::string& service) {
  const size_t colon = service.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == service.size()) {
    return Status::InvalidArgument("service '" + service + "': expected NAME:PORT");
  }
  const std::string host = service.substr(0, colon), port = service.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result); rc != 0) {
    return Status::Unavailable("resolving " + host + ": " + gai_strerror(rc));
  }
  std::set<std::string> endpoints;
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, ip, sizeof(ip));
      endpoints.insert(std::string(ip) + ":" + port);
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, ip, sizeof(ip));
      endpoints.insert("[" + std::string(ip) + "]:" + port);
    }
  }
  freeaddrinfo(result);
  return std::vector<std::string>(endpoints.begin(), endpoints.end());
}

StatusOr<std::vector<std::string>> ParseMembersText(std::string_view text) {
  std::vector<std::string> members;
  size_t line_start = 0;
  for (int number = 1; line_start < text.size(); ++number) {
    size_t end = text.find('\n', line_start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(line_start, end - line_start);
    line_start = end + 1;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t colon = line.rfind(':');
    bool port_ok = colon != std::string_view::npos && colon > 0 && colon + 1 < line.size() &&
                   line.size() - colon - 1 <= 5;
    for (size_t i = colon + 1; port_ok && i < line.size(); ++i) {
      port_ok = std::isdigit(static_cast<unsigned char>(line[i])) != 0;
    }
    const bool spaces = line.find_first_of(" \t\r") != std::string_view::npos;
    if (!port_ok || spaces || std::stoul(std::string(line.substr(colon + 1))) > 65535) {
      return Status::InvalidArgument("line " + std::to_string(number) + ": expected HOST:PORT, got '" +
                                     std::string(line.substr(0, 80)) + "'");
    }
    members.emplace_back(line);
  }
  return members;
}

StatusOr<std::vector<std::string>> ReadMembersFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("members file " + path + ": cannot open");
  std::string text(kMaxMembersFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxMembersFileBytes) {
    return Status::InvalidArgument("members file " + path + ": larger than " +
                                   std::to_string(kMaxMembersFileBytes) + " bytes");
  }
  StatusOr<std::vector<std::string>> members = ParseMembersText(text);
  if (!members.ok())
    return Status::InvalidArgument("members file " + path + ": " + members.status().message());
  return members;
}

Router::Router(const AgentConfig& config, metrics::AgentMetrics* metrics)
    : config_(config), metrics_(metrics), channels_(TransportOf(config)) {}

StatusOr<std::unique_ptr<Router>> Router::Start(const AgentConfig& config, metrics::AgentMetrics* metrics) {
  std::unique_ptr<Router> router(new Router(config, metrics));
  router->Refresh();
  router->poller_ = std::thread([r = router.get()] { r->PollLoop(); });
  return router;
}

Router::~Router() { Stop(); }

void Router::Stop() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void Router::PollLoop() {
  std::unique_lock<std::mutex> lock(poll_mu_);
  while (!stopping_) {
    poll_cv_.wait_for(lock, std::chrono::milliseconds(config_.refresh_ms));
    if (stopping_) break;
    lock.unlock();
    Refresh();
    lock.lock();
  }
}

void Router::RefreshNow() { Refresh(); }

void Router::Refresh() {
  auto poll = [this](const std::vector<std::string>& statics, const std::string& service,
                     const std::string& members_file, const std::vector<MemberStatus>& previous) {
    std::vector<std::string> endpoints = statics;
    if (!service.empty()) {
      StatusOr<std::vector<std::string>> resolved = ResolveService(service);
      if (resolved.ok()) {
        endpoints.insert(endpoints.end(), resolved->begin(), resolved->end());
      } else {
        TANDEM_LOG(Warning) << resolved.status().ToString();
      }
    }
    if (!members_file.empty()) {
      StatusOr<std::vector<std::string>> listed = ReadMembersFile(members_file);
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::string>& last_good = file_members_[members_file];
      if (listed.ok()) {
        last_good = std::move(*listed);
      } else {
        // A file caught half-written (or removed for a moment) keeps its last members.
        TANDEM_LOG(Warning) << listed.status().ToString() << "; keeping its last " << last_good.size()
                            << " members";
      }
      endpoints.insert(endpoints.end(), last_good.begin(), last_good.end());
    }
    std::sort(endpoints.begin(), endpoints.end());
    endpoints.erase(std::unique(endpoints.begin(), endpoints.end()), endpoints.end());
    std::vector<MemberStatus> out;
    for (const std::string& endpoint : endpoints) {
      MemberStatus m;
      m.endpoint = endpoint;
      for (const MemberStatus& p : previous) {
        if (p.endpoint == endpoint) m.routed = p.routed;
      }
      auto stub = v1::AgentStatus::NewStub(channels_.Get(endpoint));
      grpc::ClientContext ctx;
      SetDeadline(&ctx, kStatusTimeoutMs);
      // Waits (within the deadline) for a channel that is reconnecting rather than failing at
      // once: this call is what keeps gRPC polling the socket (the router serves no gRPC, so no
      // server thread does), and a mutual-TLS handshake needs several round trips. Failing fast
      // left only gRPC's 5 s backup poller to advance it, slower than its 20 s connect timeout: a
      // router never again reached a member that had once refused it. The price: a member that
      // does not answer delays this poll by the deadline (members are asked one after another;
      // asking all at once, with the callback API or an async queue, came with higher TTFT and
      // ITL through the router in single runs of tools.bench_aiperf, not yet understood).
      ctx.set_wait_for_ready(true);
      v1::StatusResponse status;
      if (stub->GetStatus(&ctx, v1::StatusRequest(), &status).ok()) {
        m.healthy = status.ready();
        m.kv_capacity_tokens = status.kv_capacity_tokens();
        m.kv_used_tokens = status.kv_used_tokens();
        m.running = status.running();
        m.waiting = status.waiting();
        m.page_tokens = status.page_tokens() == 0 ? 16 : status.page_tokens();
        m.prefix_blocks.insert(status.prefix_blocks().begin(), status.prefix_blocks().end());
      }
      out.push_back(std::move(m));
    }
    return out;
  };
  std::vector<MemberStatus> prefill, decode;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prefill = prefill_;
    decode = decode_;
  }
  prefill = poll(config_.prefill_endpoints, config_.prefill_service, config_.prefill_members_file, prefill);
  decode = poll(config_.decode_endpoints, config_.decode_service, config_.decode_members_file, decode);
  std::lock_guard<std::mutex> lock(mu_);
  // Keep the in-flight counts that moved while polling.
  for (MemberStatus& m : prefill) {
    for (const MemberStatus& p : prefill_) {
      if (p.endpoint == m.endpoint) m.routed = p.routed;
    }
  }
  for (MemberStatus& m : decode) {
    for (const MemberStatus& p : decode_) {
      if (p.endpoint == m.endpoint) m.routed = p.routed;
    }
  }
  prefill_ = std::move(prefill);
  decode_ = std::move(decode);
}

Status Router::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto any = [](const std::vector<MemberStatus>& v) {
    return std::any_of(v.begin(), v.end(), [](const MemberStatus& m) { return m.healthy; });
  };
  if (!any(prefill_)) return Status::Unavailable("no ready prefill member");
  if (!any(decode_)) return Status::Unavailable("no ready decode member");
  return Status::Ok();
}

std::vector<MemberStatus> Router::prefill_members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefill_;
}

std::vector<MemberStatus> Router::decode_members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return decode_;
}

void Router::AddRouted(const std::string& prefill, const std::string& decode, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  for (MemberStatus& m : prefill_) {
    if (m.endpoint == prefill) m.routed += delta;
  }
  for (MemberStatus& m : decode_) {
    if (m.endpoint == decode) m.routed += delta;
  }
}

StatusOr<std::unique_ptr<GenerationStream>> Router::Start(const GenerateCall& call) {
  std::unordered_set<std::string> failed_prefill, failed_decode;
  Status last = Status::Unavailable("no ready pool members");
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::string prefill, decode;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const uint32_t page_tokens = prefill_.empty() ? 16 : prefill_.front().page_tokens;
      const std::vector<uint64_t> blocks = PrefixBlockHashes(call.tenant, call.prompt, page_tokens);
      int p = PickPrefill(prefill_, blocks, failed_prefill);
      int d = PickDecode(decode_, failed_decode);
      // The retry prefers another pair, but a one-member pool retries on the same member.
      if (p < 0) p = PickPrefill(prefill_, blocks, {});
      if (d < 0) d = PickDecode(decode_, {});
      if (p < 0 || d < 0) {
        if (attempt > 0) return last;
        return Status::Unavailable(p < 0 ? "no ready prefill member" : "no ready decode member");
      }
      prefill = prefill_[p].endpoint;
      decode = decode_[d].endpoint;
      // Until the next poll says what the member holds, count this prompt's blocks as its own (it
      // publishes them as it prefills), so a repeat arriving meanwhile follows its KV there.
      prefill_[p].prefix_blocks.insert(blocks.begin(), blocks.end());
    }
    PairSide failed = PairSide::kNeither;
    StatusOr<std::unique_ptr<GenerationStream>> stream = StartOnPair(call, prefill, decode, &failed);
    if (stream.ok() || !Retryable(stream.status()) || !call.fault.empty()) return stream;
    last = stream.status();
    TANDEM_LOG(Warning) << "request " << call.request_id << " failed on (" << prefill << ", " << decode
                        << "), attempt " << attempt + 1 << ": " << last.ToString();
    // A member that refused (draining, or gone) takes no more work until a poll says it is ready.
    if (last.code() == StatusCode::kUnavailable && failed != PairSide::kNeither) {
      MarkUnready(failed == PairSide::kPrefill ? prefill : decode);
    }
    failed_prefill.insert(prefill);
    failed_decode.insert(decode);
  }
  return last;
}

void Router::MarkUnready(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::vector<MemberStatus>* pool : {&prefill_, &decode_}) {
    for (MemberStatus& m : *pool) {
      if (m.endpoint == endpoint) m.healthy = false;
    }
  }
}

StatusOr<std::unique_ptr<GenerationStream>> Router::StartOnPair(const GenerateCall& call,
                                                                const std::string& prefill,
                                                                const std::string& decode, PairSide* failed) {
  AddRouted(prefill, decode, 1);
  in_flight_.fetch_add(1);
  auto release = [this, prefill, decode] {
    AddRouted(prefill, decode, -1);
    in_flight_.fetch_sub(1);
  };
  v1::GenerateRequest greq;
  greq.set_request_id(call.request_id);
  for (int32_t t : call.prompt) greq.add_prompt_token_ids(t);
  ToProto(call.params, greq.mutable_sampling());
  greq.set_tenant(call.tenant);
  auto ctx = std::make_unique<grpc::ClientContext>();
  SetDeadline(ctx.get(), kGenerateTimeoutMs);
  auto decode_stub = v1::DecodeAgent::NewStub(channels_.Get(decode));
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader = decode_stub->Generate(ctx.get(), greq);
  v1::GenerateEvent event;
  const bool got = reader->Read(&event);
  if (!got || !event.has_reservation()) {
    if (got) ctx->TryCancel();  // a stream that did not start with a reservation: end it
    grpc::Status st = reader->Finish();
    release();
    *failed = PairSide::kDecode;
    return st.ok() ? Status::Internal("decode member " + decode + " sent no reservation")
                   : FromGrpc(st, "decode member " + decode);
  }
  const v1::Reservation& reservation = event.reservation();

  v1::PrefillRequest preq;
  preq.set_request_id(call.request_id);
  *preq.mutable_prompt_token_ids() = greq.prompt_token_ids();
  *preq.mutable_sampling() = greq.sampling();
  preq.set_tenant(call.tenant);
  preq.set_decode_endpoint(decode);
  preq.set_transfer_id(reservation.transfer_id());
  *preq.mutable_target_layout() = reservation.layout();
  *preq.mutable_page_tags() = reservation.page_tags();
  preq.set_fault(call.fault);
  grpc::ClientContext pctx;
  SetDeadline(&pctx, static_cast<int64_t>(config_.transfer_timeout_ms) * 2 + 10'000);
  v1::PrefillResponse presp;
  auto prefill_stub = v1::PrefillAgent::NewStub(channels_.Get(prefill));
  // The prefill runs on a helper thread so that a client going away meanwhile cancels it (and
  // the reservation) within one poll, not after the whole prompt.
  grpc::Status pst;
  {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread call_thread([&] {
      grpc::Status st = prefill_stub->Prefill(&pctx, preq, &presp);
      std::lock_guard<std::mutex> lock(mu);
      pst = std::move(st);
      done = true;
      cv.notify_one();
    });
    std::unique_lock<std::mutex> lock(mu);
    bool cancelled = false;
    while (!cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return done; })) {
      if (!cancelled && call.cancelled && call.cancelled()) {
        cancelled = true;
        pctx.TryCancel();
        ctx->TryCancel();
      }
    }
    lock.unlock();
    call_thread.join();
  }
  if (!pst.ok()) {
    ctx->TryCancel();
    (void)reader->Finish();
    release();
    *failed = PairSide::kPrefill;
    return FromGrpc(pst, "prefill member " + prefill);
  }
  StatusOr<StreamEvent> first = FromProto(presp.first());
  if (!first.ok() || first->finish) {
    // A bad answer, or a request its first token already ended: the reservation is released by
    // ending the Generate call (the decode member cancels the request and frees its pages).
    ctx->TryCancel();
    (void)reader->Finish();
    release();
    if (!first.ok()) return first.status();
    return std::unique_ptr<GenerationStream>(new FinishedStream(std::move(*first), presp.cached_tokens()));
  }
  return std::unique_ptr<GenerationStream>(
      new RemoteStream(std::move(ctx), std::move(reader), std::move(*first), presp.cached_tokens(), release));
}

}  // namespace tandem::agent
