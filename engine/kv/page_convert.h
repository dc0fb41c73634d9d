#pragma once
// What a receiving pool's pages look like (KvLayout), and the conversion of one page of a pool
// into that layout: how a prefill pool hands its pages to a decode pool of another precision.
//
// A page converts token slot by token slot and layer by layer: every latent value is read back as
// bf16 (PagePool::ReadRows: bf16 as stored, fp8 e4m3 decoded with its layer's scale) and stored in
// the target's dtype (bf16 as is; fp8 e4m3 with the target's per-layer scale, saturating at
// +-448); GLM's indexer keys go through fp32 (ReadIndexKeys / WriteIndexKeys: FP8 rows get their
// own per-row scale).
// Same dtype and, for FP8, the same scales: a plain copy of the page's bytes. The target must cut
// its pages at the same token boundaries (page_tokens) and hold the same rows (shape).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/kv/page_pool.h"

namespace tandem::engine::kv {

// The layout of a pool's pages, as the receiving side of a transfer announces it.
struct KvLayout {
  KvShape shape;
  KvCacheDtype dtype = KvCacheDtype::kBf16;
  size_t page_tokens = 0;
  size_t page_bytes = 0;  // of one page, all layers (PagePool::geometry().page_bytes)
  // FP8: the receiving pool's per-layer scales ([num_layers], fixed); empty for BF16.
  std::vector<float> fp8_layer_scales;
};

// The layout of `pool`'s pages. FailedPrecondition for an FP8 pool with a layer whose scale is not
// fixed yet (a receiver must fix its scales before it announces them).
StatusOr<KvLayout> LayoutOf(const PagePool& pool);

// "bf16, 3 layers x (512 + 64), 16 tokens per page", for error messages.
std::string DescribeLayout(const KvLayout& layout);

// Converts pages of one source pool into one target layout. Keeps a one-page scratch pool of the
// target's layout, so each instance is for one thread at a time; the source pool must outlive it.
class PageConverter {
 public:
  // InvalidArgument when `target` cannot take `source`'s pages: another shape or page_tokens, a
  // page_bytes that disagrees with the target's dtype, or FP8 scales missing or not > 0.
  static StatusOr<std::unique_ptr<PageConverter>> Create(const PagePool& source, const KvLayout& target);

  // Writes `page` of the source pool in the target layout into `out` (target.page_bytes long).
  // Token slots [0, valid_tokens) are converted; the slots past them are written as zeros so the
  // bytes sent do not depend on what the page held before. REQUIRES: page < source.num_pages(),
  // valid_tokens <= page_tokens. InvalidArgument for a wrong `out` size.
  Status Convert(PageId page, size_t valid_tokens, std::span<uint8_t> out);

  bool is_copy() const { return scratch_ == nullptr; }  // same dtype and scales: bytes copied

 private:
  PageConverter(const PagePool& source, const KvLayout& target) : source_(source), target_(target) {}

  const PagePool& source_;
  KvLayout target_;
  std::unique_ptr<PagePool> scratch_;  // one page in the target layout; null for a plain copy
  std::vector<uint16_t> rows_;         // [page_tokens][row_values] bf16, one layer at a time
  std::vector<float> keys_;            // [page_tokens][index_head_dim] fp32 indexer keys, one layer
};

}  // namespace tandem::engine::kv
