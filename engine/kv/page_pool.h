#pragma once
// The paged KV cache storage: one byte buffer cut into pages of `page_tokens` tokens, holding per
// token and layer the MLA latent row (kv_lora 512 + rope 64 values) and, for GLM's DSA layers, the
// indexer key row (index_head_dim 128 values), in bf16 or fp8 e4m3.
//
// Layout (docs/kv-cache.md): page-major, all layers of a page together, each layer's latent rows
// then its indexer rows (layers with indexer rows only):
//   data: [num_pages][num_layers] {
//     latent:  [page_tokens][kv_lora + rope]   bf16 bits | fp8 e4m3 codes (per-layer scale)
//     indexer: [page_tokens][index_head_dim]   bf16 bits | fp8 e4m3 codes
//              [page_tokens] fp32 scales         (FP8 only: one per token row)
//   }
// so one PageId addresses a token range in every layer, a page is one contiguous transfer, and the
// allocator, block tables, integrity tags, the transfer digest and the prefix cache cover the
// indexer keys with the latent, per page, not per (page, layer).
//
// FP8 scale policy (latent): one scale per layer's cache tensor ("per-tensor", as vLLM's k_scale),
// value = code * scale. Taken from the checkpoint's k_scale-style tensor when given
// (`fp8_layer_scales`); otherwise calibrated from the first batch written to that layer
// (max|x| / 448, see Fp8E4M3ScaleForBf16) and fixed from then on. Later values beyond the range
// saturate at ±448. Indexer keys: one fp32 scale per token row, max|row| / 448 (1 for a zero row),
// stored beside the codes, as production DSA engines do (128 + 4 = 132 bytes per token and layer).
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

// The attention cache shape of one model (Kimi K2.x: 61 layers; GLM 5.x: 78 layers plus the DSA
// indexer keys). model::KvShapeFor derives it from a ModelConfig.
struct KvShape {
  size_t num_layers = 61;
  size_t kv_lora_rank = 512;
  size_t rope_dim = 64;
  // glm_moe_dsa: the DSA indexer key width (index_head_dim, 128 for GLM 5.x); 0 = no indexer rows.
  size_t index_head_dim = 0;
  // Which layers keep indexer rows when index_head_dim > 0: empty = every layer, else
  // [num_layers] (a "shared" DSA layer reuses the previous full layer's top-k and keeps no keys).
  std::vector<bool> index_layers;

  size_t row_values() const { return kv_lora_rank + rope_dim; }
  // REQUIRES: layer < num_layers.
  bool HasIndexRows(size_t layer) const {
    return index_head_dim > 0 && (index_layers.empty() || index_layers[layer]);
  }
  size_t num_index_layers() const;
  bool operator==(const KvShape&) const = default;
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
  size_t row_bytes = 0;        // one token's latent row in one layer
  size_t index_row_bytes = 0;  // one token's indexer keys in a layer that has them (FP8: + scale)
  size_t token_bytes = 0;      // one token, all layers: latent and indexer rows
  size_t page_bytes = 0;       // one page, all layers (page_tokens * token_bytes)
  size_t num_pages = 0;
  size_t capacity_tokens = 0;
  size_t used_bytes() const { return num_pages * page_bytes; }
};

// Validates the config and computes its geometry without allocating anything.
StatusOr<PoolGeometry> ComputePoolGeometry(const PagePoolConfig& config);
// The bytes of one page of `config` (its budget is ignored); the errors of ComputePoolGeometry.
StatusOr<size_t> ComputePageBytes(const PagePoolConfig& config);

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

  // The page's rows of `layer` in place ([page_tokens][kv_lora + rope]: bf16 bits in a BF16 pool,
  // e4m3 codes of value · layer_scale(layer)'s inverse in an FP8 pool), for readers that would
  // otherwise copy them out (attention). OutOfRange for a page or layer outside the pool.
  StatusOr<const uint8_t*> LatentRowsInPlace(PageId page, size_t layer) const;

  // Stores the DSA indexer keys of tokens [first_token, first_token + n) of `layer` in `page`,
  // n = keys.size() / index_head_dim. keys: [n][index_head_dim] fp32. BF16 pools round each value
  // to bf16 (nearest even); FP8 pools store e4m3(x / s) with s = max|row| / 448 per token row.
  // FailedPrecondition for a layer without indexer rows; InvalidArgument/OutOfRange on bad indices
  // or sizes (as WriteRows).
  Status WriteIndexKeys(PageId page, size_t layer, size_t first_token, std::span<const float> keys);
  // Reads indexer keys back as fp32 into `out` ([n][index_head_dim]): bf16 widened exactly, FP8
  // code * its row's scale. Errors as WriteIndexKeys.
  Status ReadIndexKeys(PageId page, size_t layer, size_t first_token, std::span<float> out) const;

  // A run of per-token data inside every page: token t's bytes are
  // [offset + t * token_bytes, offset + (t + 1) * token_bytes) from the page's start.
  struct TokenBlock {
    size_t offset = 0;
    size_t token_bytes = 0;
  };
  // The blocks of `layer` in layout order: the latent rows, then (layers with indexer rows) the
  // indexer keys and, FP8 only, their scales. Together they cover the layer's part of a page; for
  // readers that walk tokens in logical order over raw bytes (DigestKv). REQUIRES: layer < num_layers.
  std::span<const TokenBlock> TokenBlocks(size_t layer) const {
    return std::span<const TokenBlock>(blocks_).subspan(block_begin_[layer],
                                                        block_begin_[layer + 1] - block_begin_[layer]);
  }

  // The raw bytes of one page (page_bytes, layout above): for transfer, digests and tests.
  // REQUIRES: page < num_pages().
  std::span<uint8_t> PageBytes(PageId page);
  std::span<const uint8_t> PageBytes(PageId page) const;

  // Zeros token slots [first_token, page_tokens) of every layer (latent and indexer rows: every
  // TokenBlock) in `page`, a page_bytes buffer laid out like this pool's pages (a copy on its way
  // out): what a sender writes past the valid tokens, so the bytes sent never carry a page's
  // earlier contents. REQUIRES: page.size() == page_bytes, first_token <= page_tokens.
  void ClearTokenSlots(std::span<uint8_t> page, size_t first_token) const;

  // FP8: the scale of `layer` and whether it is fixed (from the checkpoint or calibrated).
  // BF16: 1.0 and true.
  float layer_scale(size_t layer) const { return scales_[layer]; }
  bool layer_scale_fixed(size_t layer) const { return scale_fixed_[layer] != 0; }

 private:
  PagePool(const PagePoolConfig& config, const PoolGeometry& geometry);
  Status CheckRange(PageId page, size_t layer, size_t first_token, size_t num_values,
                    size_t row_values) const;
  Status CheckRows(PageId page, size_t layer, size_t first_token, size_t num_values) const {
    return CheckRange(page, layer, first_token, num_values, config_.shape.row_values());
  }
  Status CheckIndexKeys(PageId page, size_t layer, size_t first_token, size_t num_values) const;
  size_t RowOffset(PageId page, size_t layer, size_t token) const;
  // Byte offset of block `block` (TokenBlocks order) of `layer` in `page`.
  size_t BlockOffset(PageId page, size_t layer, size_t block) const {
    return static_cast<size_t>(page) * geometry_.page_bytes + blocks_[block_begin_[layer] + block].offset;
  }

  PagePoolConfig config_;
  PoolGeometry geometry_;
  std::vector<TokenBlock> blocks_;   // every layer's TokenBlocks, layer after layer
  std::vector<size_t> block_begin_;  // [num_layers + 1]: layer l's blocks start at blocks_[block_begin_[l]]
  AlignedBuffer<uint8_t> data_;
  std::vector<float> scales_;
  std::vector<uint8_t> scale_fixed_;
};

}  // namespace tandem::engine::kv
