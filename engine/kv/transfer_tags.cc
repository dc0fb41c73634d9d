#include "engine/kv/transfer_tags.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/hash.h"

namespace tandem::engine::kv {

uint32_t TransferTagIssuer::Next() {
  // A bijection of the counter (odd multiply, xor-shifts) keyed by the seed: distinct values for
  // 2^32 consecutive counters, of which exactly one maps to 0 and is skipped.
  for (;;) {
    uint32_t x = counter_.fetch_add(1, std::memory_order_relaxed) + seed_;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    if (x != 0) return x;
  }
}

void KvDigest::Mix(uint64_t w) {
  state_ = (state_ ^ w) * 0x9fb21c651e98df25ull;
  state_ ^= state_ >> 29;
}

void KvDigest::Update(std::span<const uint8_t> bytes) {
  // Words are cut from the whole stream, so the digest does not depend on how it is chunked.
  size_t i = 0;
  while (pending_bytes_ != 0 && i < bytes.size()) {
    pending_ |= static_cast<uint64_t>(bytes[i++]) << (8 * pending_bytes_);
    if (++pending_bytes_ == 8) {
      Mix(pending_);
      pending_ = 0;
      pending_bytes_ = 0;
    }
  }
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    Mix(w);
  }
  for (; i < bytes.size(); ++i) pending_ |= static_cast<uint64_t>(bytes[i]) << (8 * pending_bytes_++);
  length_ += bytes.size();
}

uint64_t KvDigest::Finish() const {
  uint64_t h = (state_ ^ pending_) * 0x9fb21c651e98df25ull;
  return Fmix64(h ^ length_);
}

StatusOr<uint64_t> DigestKv(const PagePool& pool, std::span<const PageId> pages, size_t num_tokens) {
  const size_t page_tokens = pool.page_tokens();
  if (num_tokens > pages.size() * page_tokens) {
    return Status::InvalidArgument(std::to_string(pages.size()) + " pages cannot hold " +
                                   std::to_string(num_tokens) + " tokens");
  }
  for (PageId p : pages) {
    if (p >= pool.num_pages()) return Status::InvalidArgument("page id outside the pool");
  }
  KvDigest digest;
  for (size_t layer = 0; layer < pool.config().shape.num_layers; ++layer) {
    for (const PagePool::TokenBlock& block : pool.TokenBlocks(layer)) {  // latent, indexer keys
      for (size_t first = 0; first < num_tokens; first += page_tokens) {
        const size_t n = std::min(page_tokens, num_tokens - first);
        std::span<const uint8_t> page = pool.PageBytes(pages[first / page_tokens]);
        digest.Update(page.subspan(block.offset, n * block.token_bytes));
      }
    }
  }
  return digest.Finish();
}

}  // namespace tandem::engine::kv
