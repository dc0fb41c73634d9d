#pragma once
// The Engine's per-request state beside the scheduler's Sequence (engine.cc, engine_transfer.cc).

#include <mutex>
#include <utility>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/output_processor.h"
#include "engine/runtime/sampler.h"

namespace tandem::engine::runtime {

struct Engine::RequestState {
  RequestState(Sampler s, OutputProcessor p) : sampler(std::move(s)), processor(std::move(p)) {}
  Sampler sampler;
  OutputProcessor processor;
};

// An open import. `mu` is held by WritePage while it copies and by whoever ends the import, so
// once `open` is false no write is in progress and none will land.
struct Engine::Import {
  std::mutex mu;
  bool open = true;
  RequestId id = 0;
  int64_t deadline_nanos = 0;
  std::vector<kv::PageId> pages;     // physical, logical order
  std::vector<uint32_t> tags;        // issued, per logical page
  std::vector<uint32_t> landed_tag;  // what WritePage stamped (0: not landed)
  size_t page_bytes = 0;
};

// The default per-request seed: a splitmix64 step over (engine seed, request id).
uint64_t RequestSeed(uint64_t engine_seed, RequestId id);

}  // namespace tandem::engine::runtime
