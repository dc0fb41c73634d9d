#pragma once
// The prefill role's gRPC service (proto/tandem.proto, PrefillAgent.Prefill): runs the prompt on
// the local prefill-only engine (its own KV dtype), takes the first token, exports the pages
// converted to the decode member's layout (EngineLoop::ExportKv), pushes them to that member
// (DecodeAgent.PushKv: pages with their tags, then the digest trailer), and answers with the first
// token once the decode member has committed. The export ends in exactly one terminal state:
// done when the commit succeeded, failed otherwise (the engine frees the pages then).

#include <atomic>

#include "agent/config.h"
#include "agent/engine_host.h"
#include "agent/grpc_util.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/prefix_blocks.h"
#include "proto/tandem.grpc.pb.h"

namespace tandem::agent {

class PrefillService final : public v1::PrefillAgent::Service {
 public:
  // REQUIRES: host and metrics outlive the service.
  PrefillService(EngineHost* host, metrics::AgentMetrics* metrics, const AgentConfig& config);

  grpc::Status Prefill(grpc::ServerContext* ctx, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;

  void StopAdmitting() { admitting_ = false; }
  int64_t in_flight() const { return in_flight_.load(); }
  // The prompt blocks this member prefilled (GetStatus reports them to routers).
  const PrefixBlockRecord& blocks() const { return blocks_; }

 private:
  // Waits for the request's first token (or its end). DeadlineExceeded / Cancelled as the call's.
  StatusOr<engine::runtime::RequestOutput> WaitFirstToken(grpc::ServerContext* ctx, OutputChannel& channel,
                                                          engine::runtime::RequestId id);
  // Streams the export to the decode member; OK once it has committed.
  Status Push(grpc::ServerContext* ctx, const v1::PrefillRequest& request, engine::runtime::KvExport& kv,
              v1::PrefillResponse* response);

  EngineHost* host_;
  metrics::AgentMetrics* metrics_;
  int64_t transfer_timeout_ms_;
  bool fault_injection_;
  ChannelCache channels_;
  PrefixBlockRecord blocks_;
  std::atomic<bool> admitting_{true};
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace tandem::agent
