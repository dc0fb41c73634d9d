#pragma once
// Small vocabulary shared by the KV cache bookkeeping: page and request identifiers.

#include <cstdint>
#include <limits>

namespace tandem::engine::kv {

// A physical page of the pool: an index in [0, num_pages).
using PageId = uint32_t;
// The engine's request identifier (unique for the engine's lifetime).
using RequestId = uint64_t;

constexpr PageId kInvalidPage = std::numeric_limits<PageId>::max();

}  // namespace tandem::engine::kv
