#include "agent/prefix_blocks.h"

namespace tandem::agent {
namespace {

// 64-bit FNV-1a over bytes, then a final avalanche (splitmix64's).
uint64_t Mix(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t Finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<uint64_t> PrefixBlockHashes(std::string_view tenant, std::span<const int32_t> tokens,
                                        size_t page_tokens) {
  std::vector<uint64_t> out;
  if (page_tokens == 0) return out;
  uint64_t parent = Finalize(Mix(0xcbf29ce484222325ull, tenant.data(), tenant.size()));
  for (size_t start = 0; start + page_tokens <= tokens.size(); start += page_tokens) {
    uint64_t h = Mix(0xcbf29ce484222325ull, &parent, sizeof(parent));
    h = Mix(h, tokens.data() + start, page_tokens * sizeof(int32_t));
    parent = Finalize(h);
    out.push_back(parent);
  }
  return out;
}

size_t MatchedBlocks(std::span<const uint64_t> blocks, const std::unordered_set<uint64_t>& held) {
  size_t n = 0;
  while (n < blocks.size() && held.count(blocks[n]) != 0) ++n;
  return n;
}

void PrefixBlockRecord::Add(std::span<const uint64_t> blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t h : blocks) {
    auto it = where_.find(h);
    if (it != where_.end()) order_.erase(it->second);
    order_.push_front(h);
    where_[h] = order_.begin();
  }
  while (order_.size() > capacity_) {
    where_.erase(order_.back());
    order_.pop_back();
  }
}

std::vector<uint64_t> PrefixBlockRecord::Snapshot(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  for (uint64_t h : order_) {
    if (out.size() >= max) break;
    out.push_back(h);
  }
  return out;
}

size_t PrefixBlockRecord::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return order_.size();
}

}  // namespace tandem::agent
