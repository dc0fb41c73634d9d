#pragma once
// Agent: one tandem-agent process's worth of serving, for its role (docs/agent.md):
//   standalone  engine (unified) + OpenAI HTTP API
//   prefill     engine (prefill-only) + gRPC PrefillAgent + AgentStatus
//   decode      engine (decode-only) + gRPC DecodeAgent + AgentStatus
//   router      Router over the pool members + OpenAI HTTP API
// Every role serves /metrics, /healthz and /readyz on the metrics port. Readiness comes from a
// periodic probe through the engine (standalone, prefill: a one-token request through the
// forward pass; decode: a call answered by the step thread) or, for a router, from a ready member
// in each pool; a probe that does not come back within engine.probeTimeoutMs turns the agent
// not-ready.
//
// Several agents may run in one process (tests do): nothing here is global.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/config.h"
#include "common/status.h"

namespace tandem::agent {

class Agent {
 public:
  // Opens the engine (if the role has one), starts the servers and background threads. Ports 0 in
  // the config pick free ports (see the accessors). Errors name what failed.
  static StatusOr<std::unique_ptr<Agent>> Start(const AgentConfig& config);
  ~Agent();  // Shutdown(0)

  uint16_t http_port() const;  // 0 for prefill and decode
  uint16_t grpc_port() const;  // 0 for router and standalone
  uint16_t metrics_port() const;
  // OK when ready; otherwise why not.
  Status Ready() const;

  // Starts a drain and returns: admission stops (new requests get 503 / UNAVAILABLE), readiness
  // and GetStatus turn false, and the grace period (shutdownGraceMs) starts. What GET /drain on
  // the metrics port does before it waits.
  void BeginDrain();
  // Drain: stop admitting, wait up to grace_ms (or what is left of a drain already begun) for
  // in-flight requests to finish, then fail the rest and stop every server and thread. Idempotent.
  void Shutdown(int64_t grace_ms);

  struct Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::agent
