#pragma once
// A request as the Engine receives it, and the scheduler's per-request state.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/kv/block_table.h"
#include "engine/kv/prefix_cache.h"
#include "engine/model/forward_types.h"
#include "engine/runtime/request_types.h"

namespace tandem::engine::runtime {

// What the agent submits. `tenant` is derived by the server from the authenticated caller (never
// from the client); it is kept for tenant-salted prefix sharing. A request without a tenant
// shares no prefix pages at all.
struct Request {
  RequestId id = 0;  // 0: the engine assigns one (Submit reports it)
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::string tenant;
};

// Where a request is in the scheduler.
enum class SeqPhase : uint8_t {
  kWaiting,     // queued: holds no pages (new, or preempted and waiting to recompute)
  kRunning,     // admitted: holds pages for every token it has computed or is about to compute
  kExportHeld,  // prefill-only role: prefilled and first token sampled; pages kept for ExportKv
  kImporting,   // decode-only role: pages reserved, its KV arriving from a prefill engine
};

// One request's state. tokens = prompt followed by the tokens generated so far; kv.num_tokens of
// them have their KV in the cache. The tokens still to feed are tokens[kv.num_tokens, size()).
// A running request in decode has exactly one pending token (the last sampled one).
struct Sequence {
  Sequence(RequestId request, size_t page_tokens, kv::PageAllocator* allocator, kv::IntegrityTracker* tracker)
      : id(request), table(request, page_tokens, allocator, tracker) {}

  RequestId id;
  std::vector<int32_t> tokens;
  size_t prompt_len = 0;
  SamplingParams params;
  std::string tenant;
  SeqPhase phase = SeqPhase::kWaiting;
  // The block table holds the page references (and keeps the integrity manifest); kv.pages mirrors
  // its page ids for the forward pass. table.num_tokens() is the reserved token count, >= kv.num_tokens.
  kv::BlockTable table;
  model::KvSequence kv;
  uint64_t admit_order = 0;  // when it was last admitted; the latest admitted is preempted first
  int64_t preemptions = 0;
  // Prefix cache (when the scheduler has one): the tenant salt (empty: no tenant, no sharing), the
  // locks on the matched prefix and on the published prompt pages (released with the pages), and
  // whether the prompt is published.
  std::string salt;
  kv::PrefixCache::Lock match_lock = nullptr;
  kv::PrefixCache::Lock publish_lock = nullptr;
  bool published = false;
  size_t cached_prompt_tokens = 0;  // of the last admission, served from the cache

  size_t num_generated() const { return tokens.size() - prompt_len; }
  size_t pending() const { return tokens.size() - static_cast<size_t>(kv.num_tokens); }
};

}  // namespace tandem::engine::runtime
