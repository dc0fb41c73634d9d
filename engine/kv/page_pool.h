#pragma once
// The paged KV cache storage: one byte buffer cut into pages of `page_tokens` tokens, holding the
// MLA latent row (kv_lora 512 + rope 64 values per token per layer) in bf16 or fp8 e4m3.
//
// Layout (docs/kv-cache.md): page-major, all layers of a page together:
//   data: [num_pages][num_layers][page_tokens][kv_lora + rope]  bf16 bits or fp8 e4m3 codes
// so one PageId addresses a token range in every layer, a page is one contiguous transfer, and the
// allocator, block tables and integrity tags are per page, not per (page, layer).
//
// FP8 scale policy: one scale per layer's cache tensor ("per-tensor", as vLLM's k_scale), value =
// code * scale. Taken from the checkpoint's k_scale-style tensor when given (`fp8_layer_scales`);
// otherwise calibrated from the first batch written to that layer (max|x| / 448, see
// Fp8E4M3ScaleForBf16) and fixed from then on. Later values beyond the range saturate at ±448.
//
// Thread safety: none. Writes and reads of distinct pages may run concurrently; the scale
// calibration of a layer happens on its first write, which the caller serializes (prefill).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/core/aligned_buffer.h"
#include "engine/core/dtype.h"
#include "engine/kv/kv_types.h"

namespace tandem::engine::kv {

// The attention cache shape of one model (Kimi K2.x: 61 layers; GLM 5.x: 78).
struct KvShape {
  size_t num_layers = 61;
  size_t kv_lora_rank = 512;
  size_t rope_dim = 64;
  size_t row_values() const { return kv_lora_rank + rope_dim; }
};

struct PagePoolConfig {
  KvShape shape;
  KvCacheDtype dtype = KvCacheDtype::kBf16;
  size_t page_tokens = 64;
  size_t budget_bytes = 0;
  // FP8 only: per-layer scales from the checkpoint ([num_layers], each > 0), or empty to
  // calibrate each layer on its first write.
  std::vector<float> fp8_layer_scales;
};

// Sizes derived from a config. Exact: capacity_tokens = num_pages * page_tokens, and
// num_pages = floor(budget_bytes / page_bytes) (the remainder, < one page, is not used).
struct PoolGeometry {
  size_t row_bytes = 0;   // one token of one layer
  size_t page_bytes = 0;  // one page, all layers
  size_t num_pages = 0;
  size_t capacity_tokens = 0;
  size_t used_bytes() const { return num_pages * page_bytes; }
};

// Validates the config and computes its geometry without allocating anything.
StatusOr<PoolGeometry> ComputePoolGeometry(const PagePoolConfig& config);

class PagePool {
 public:
  // Allocates num_pages * page_bytes (zeroed, huge-page aligned). InvalidArgument on a bad config
  // or a budget under one page; ResourceExhausted when the memory cannot be had.
  static StatusOr<std::unique_ptr<PagePool>> Create(const PagePoolConfig& config);

  const PoolGeometry& geometry() const { return geometry_; }
  const PagePoolConfig& config() const { return config_; }
  KvCacheDtype dtype() const { return config_.dtype; }
  size_t num_pages() const { return geometry_.num_pages; }
  size_t page_tokens() const { return config_.page_tokens; }

  // Stores rows [first_token, first_token + n) of `layer` in `page`, n = bf16_rows.size() /
  // row_values. bf16_rows: [n][kv_lora + rope] bf16 bits. FP8 pools convert with the layer's scale
  // (calibrating it first when not yet fixed). InvalidArgument/OutOfRange on bad indices or sizes.
  Status WriteRows(PageId page, size_t layer, size_t first_token, std::span<const uint16_t> bf16_rows);

  // Fixes `layer`'s FP8 scale from a whole batch (the first prefill batch's latent rows for that
  // layer, any length) before its first write: max|x| / 448. A no-op when the scale is already
  // fixed (checkpoint scale or earlier calibration) and for BF16 pools. OutOfRange on a bad layer.
  // Without this call the first WriteRows to the layer calibrates on the rows it writes.
  Status CalibrateLayerScale(size_t layer, std::span<const uint16_t> bf16_values);

  // Reads rows back as bf16 into `out` ([n][kv_lora + rope], n = out.size() / row_values).
  Status ReadRows(PageId page, size_t layer, size_t first_token, std::span<uint16_t> out) const;

  // The page's rows of `layer` in place ([page_tokens][kv_lora + rope] bf16 bits), for readers
  // that would otherwise copy them out (decode attention). BF16 pools only: FailedPrecondition for
  // an FP8 pool (use ReadRows), OutOfRange for a page or layer outside the pool.
  StatusOr<const uint16_t*> Bf16RowsInPlace(PageId page, size_t layer) const;

  // The raw bytes of one page (page_bytes, layout above): for transfer, digests and tests.
  // REQUIRES: page < num_pages().
  std::span<uint8_t> PageBytes(PageId page);
  std::span<const uint8_t> PageBytes(PageId page) const;

  // FP8: the scale of `layer` and whether it is fixed (from the checkpoint or calibrated).
  // BF16: 1.0 and true.
  float layer_scale(size_t layer) const { return scales_[layer]; }
  bool layer_scale_fixed(size_t layer) const { return scale_fixed_[layer] != 0; }

 private:
  PagePool(const PagePoolConfig& config, const PoolGeometry& geometry);
  Status CheckRows(PageId page, size_t layer, size_t first_token, size_t num_values) const;
  size_t RowOffset(PageId page, size_t layer, size_t token) const;

  PagePoolConfig config_;
  PoolGeometry geometry_;
  AlignedBuffer<uint8_t> data_;
  std::vector<float> scales_;
  std::vector<uint8_t> scale_fixed_;
};

}  // namespace tandem::engine::kv
