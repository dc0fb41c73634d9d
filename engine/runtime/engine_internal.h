#pragma once
// The Engine's per-request state beside the scheduler's Sequence (engine.cc, engine_transfer.cc).

#include <utility>

#include "engine/runtime/engine.h"
#include "engine/runtime/output_processor.h"
#include "engine/runtime/sampler.h"

namespace tandem::engine::runtime {

struct Engine::RequestState {
  RequestState(Sampler s, OutputProcessor p) : sampler(std::move(s)), processor(std::move(p)) {}
  Sampler sampler;
  OutputProcessor processor;
};

// The default per-request seed: a splitmix64 step over (engine seed, request id).
uint64_t RequestSeed(uint64_t engine_seed, RequestId id);

}  // namespace tandem::engine::runtime
