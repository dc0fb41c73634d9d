#pragma once
// The router role's GenerationBackend: per request, one (prefill, decode) pair of pool members.
//
// Members come from static lists (tandem local), headless Services' DNS names (in a cluster:
// every A record is a pod) or members files (host:port lines), re-read every refresh_ms, when
// each member's GetStatus is also polled
// (load, KV occupancy, and for prefill members the prompt blocks they hold). The prefill member
// is the one holding the longest leading run of the prompt's blocks (prefix-cache affinity from
// the members' own reports), load breaking ties; the decode member is the least loaded by KV
// occupancy and queue depth. A pair that fails before any token was produced is retried on
// another pair, up to three pairs; a member that refuses with UNAVAILABLE (draining: its pod is
// leaving) is taken out of the choice until a poll says it is ready again, so a scale-down costs
// no request (docs/autoscaling.md, "Drain").
//
// Request flow (docs/agent.md): decode Generate (reservation) -> prefill Prefill (prefill, convert,
// push, commit) -> the first token from the prefill answer, then the decode member's stream.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "agent/config.h"
#include "agent/generation.h"
#include "agent/grpc_util.h"
#include "agent/metrics/agent_metrics.h"
#include "common/status.h"

namespace tandem::agent {

struct MemberStatus {
  std::string endpoint;
  bool healthy = false;  // the last GetStatus answered and said ready
  uint64_t kv_capacity_tokens = 0;
  uint64_t kv_used_tokens = 0;
  uint64_t running = 0;
  uint64_t waiting = 0;
  uint32_t page_tokens = 16;
  std::unordered_set<uint64_t> prefix_blocks;
  int64_t routed = 0;  // requests this router has in flight on it
};

// Pure choice functions (tested on their own). -1 when no member is healthy (or all excluded).
int PickPrefill(const std::vector<MemberStatus>& members, const std::vector<uint64_t>& prompt_blocks,
                const std::unordered_set<std::string>& exclude);
int PickDecode(const std::vector<MemberStatus>& members, const std::unordered_set<std::string>& exclude);

class Router : public GenerationBackend {
 public:
  // Starts the member poller. REQUIRES: metrics outlives the router.
  static StatusOr<std::unique_ptr<Router>> Start(const AgentConfig& config, metrics::AgentMetrics* metrics);
  ~Router() override;  // Stop()

  StatusOr<std::unique_ptr<GenerationStream>> Start(const GenerateCall& call) override;
  int64_t in_flight() const override { return in_flight_.load(); }

  // Ready when at least one prefill and one decode member are healthy; the error says what is missing.
  Status Ready() const;
  std::vector<MemberStatus> prefill_members() const;
  std::vector<MemberStatus> decode_members() const;
  // Polls every member now (tests; the poller does it every refresh_ms).
  void RefreshNow();
  void Stop();

 private:
  explicit Router(const AgentConfig& config, metrics::AgentMetrics* metrics);
  void PollLoop();
  void Refresh();
  enum class PairSide { kNeither, kPrefill, kDecode };  // which member a failed pair failed on
  StatusOr<std::unique_ptr<GenerationStream>> StartOnPair(const GenerateCall& call,
                                                          const std::string& prefill,
                                                          const std::string& decode, PairSide* failed);
  void AddRouted(const std::string& prefill, const std::string& decode, int64_t delta);
  void MarkUnready(const std::string& endpoint);

  AgentConfig config_;
  metrics::AgentMetrics* metrics_;
  ChannelCache channels_;
  mutable std::mutex mu_;
  std::vector<MemberStatus> prefill_;                             // guarded by mu_
  std::vector<MemberStatus> decode_;                              // guarded by mu_
  std::map<std::string, std::vector<std::string>> file_members_;  // last good read per file; mu_
  std::atomic<int64_t> in_flight_{0};
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;  // guarded by poll_mu_
  std::thread poller_;
};

// A members file's text: one HOST:PORT per line; blank lines and '#' comments skipped. The
// first bad line is an error (the router then keeps the file's members out of that poll).
StatusOr<std::vector<std::string>> ParseMembersText(std::string_view text);
// ParseMembersText of a file of at most 1 MiB. NotFound when it cannot be opened.
StatusOr<std::vector<std::string>> ReadMembersFile(const std::string& path);

// host:port endpoints of `service` ("name:port"): every address its DNS name resolves to.
StatusOr<std::vector<std::string>> ResolveService(const std::string& service);

}  // namespace tandem::agent
