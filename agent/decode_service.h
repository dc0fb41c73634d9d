#pragma once
// The decode role's gRPC service (proto/tandem.proto, DecodeAgent):
//   Generate  reserves the request's pages (EngineLoop::ReserveImport, waiting up to
//             queue_wait_ms for free pages), sends the Reservation, then the request's tokens
//             until its finish. The client cancelling the call cancels the request.
//   PushKv    lands a prefill agent's pages (WritePage, on this thread) and, on the trailer,
//             commits (tags and digest checked) before it answers. A stream that ends without a
//             trailer aborts the transfer. Failures are counted by reason.

#include <atomic>

#include "agent/config.h"
#include "agent/engine_host.h"
#include "agent/metrics/agent_metrics.h"
#include "proto/tandem.grpc.pb.h"

namespace tandem::agent {

class DecodeService final : public v1::DecodeAgent::Service {
 public:
  // REQUIRES: host and metrics outlive the service.
  DecodeService(EngineHost* host, metrics::AgentMetrics* metrics, const AgentConfig& config);

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateEvent>* writer) override;
  grpc::Status PushKv(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushKvMessage>* reader,
                      v1::PushKvResponse* response) override;

  // Drain: new Generate calls get UNAVAILABLE; running ones continue.
  void StopAdmitting() { admitting_ = false; }
  int64_t in_flight() const { return in_flight_.load(); }

 private:
  EngineHost* host_;
  metrics::AgentMetrics* metrics_;
  int64_t queue_wait_ms_;
  std::atomic<bool> admitting_{true};
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace tandem::agent
