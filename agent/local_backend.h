#pragma once
// The standalone role's GenerationBackend: requests go straight into the local engine's loop.

#include <atomic>

#include "agent/engine_host.h"
#include "agent/generation.h"

namespace tandem::agent {

class LocalBackend : public GenerationBackend {
 public:
  explicit LocalBackend(EngineHost* host) : host_(host) {}  // REQUIRES: host outlives this
  StatusOr<std::unique_ptr<GenerationStream>> Start(const GenerateCall& call) override;
  int64_t in_flight() const override { return in_flight_.load(); }

 private:
  EngineHost* host_;
  std::atomic<int64_t> in_flight_{0};
};

// One RequestOutput as a stream event.
StreamEvent EventFromOutput(engine::runtime::RequestOutput output);

}  // namespace tandem::agent
