#pragma once
// Prefix-cache affinity for the router (router.h). A prompt's blocks are its whole pages of
// tokens; block i's hash chains the tenant salt, block i-1's hash and the block's tokens, so two
// prompts share block hashes exactly as long as they share a tenant and whole leading pages: the
// unit the engine's prefix cache shares (engine/kv/prefix_cache.h).
//
// A prefill agent records the blocks of the prompts it prefilled (its engine keeps them in the
// prefix cache) and reports them in GetStatus; the router matches a new prompt's blocks against
// each member's report. The record is bounded (oldest forgotten first), like the cache itself.

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tandem::agent {

// The hashes of the whole pages of `tokens` (tokens.size() / page_tokens of them).
std::vector<uint64_t> PrefixBlockHashes(std::string_view tenant, std::span<const int32_t> tokens,
                                        size_t page_tokens);

// How many leading blocks of `blocks` are in `held`.
size_t MatchedBlocks(std::span<const uint64_t> blocks, const std::unordered_set<uint64_t>& held);

// A bounded, thread-safe record of block hashes, most recently used first.
class PrefixBlockRecord {
 public:
  explicit PrefixBlockRecord(size_t capacity) : capacity_(capacity) {}
  void Add(std::span<const uint64_t> blocks);
  // At most `max` hashes, most recent first.
  std::vector<uint64_t> Snapshot(size_t max) const;
  size_t size() const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<uint64_t> order_;  // front: most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

}  // namespace tandem::agent
