#pragma once
// Prefill -> decode transfer checks (step 6 wires them into the transfer):
//   - the receiving (decode) side issues a 32-bit tag per page, never 0; the sender writes it after
//     the page's data, and the receiver's TagTracker expects it, so a write from an older, aborted
//     transfer that lands late carries the wrong tag and is caught by VerifyBatch;
//   - a digest over the transferred KV bytes in logical token order, independent of which physical
//     pages hold them, checked by the receiver before the first decode token.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/kv/kv_types.h"
#include "engine/kv/page_pool.h"

namespace tandem::engine::kv {

// Issues transfer tags: distinct for 2^32 - 1 consecutive calls, never 0, not guessable from a
// page id. Thread-safe (one atomic counter).
class TransferTagIssuer {
 public:
  explicit TransferTagIssuer(uint32_t seed = 0x6a09e667u) : seed_(seed) {}
  uint32_t Next();

 private:
  uint32_t seed_;
  std::atomic<uint32_t> counter_{0};
};

// Streaming 64-bit digest of a byte sequence (8-byte words, multiply-xorshift mixing).
class KvDigest {
 public:
  void Update(std::span<const uint8_t> bytes);
  uint64_t Finish() const;

 private:
  void Mix(uint64_t word);

  uint64_t state_ = 0x243f6a8885a308d3ull;
  uint64_t length_ = 0;
  uint64_t pending_ = 0;  // little-endian bytes not yet making a whole word
  size_t pending_bytes_ = 0;
};

// The digest of the first `num_tokens` tokens held by `pages` (logical order) in `pool`: for each
// layer, each token's latent row in logical order, then (GLM's DSA layers) each token's indexer
// keys and, FP8, their scales (PagePool::TokenBlocks). The same KV in other physical pages digests
// the same; slots past num_tokens do not count.
// InvalidArgument when the pages cannot hold num_tokens or name a page outside the pool.
StatusOr<uint64_t> DigestKv(const PagePool& pool, std::span<const PageId> pages, size_t num_tokens);

}  // namespace tandem::engine::kv
