#include "engine/kv/page_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/logging.h"
#include "engine/formats/convert.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine::kv {
namespace {

// Bytes of one token's indexer keys in one layer: bf16 values, or e4m3 codes plus an fp32 scale.
size_t IndexRowBytes(KvCacheDtype dtype, size_t index_head_dim) {
  if (index_head_dim == 0) return 0;
  return dtype == KvCacheDtype::kBf16 ? 2 * index_head_dim : index_head_dim + sizeof(float);
}

}  // namespace

size_t KvShape::num_index_layers() const {
  if (index_head_dim == 0) return 0;
  if (index_layers.empty()) return num_layers;
  size_t n = 0;
  for (bool b : index_layers) n += b ? 1 : 0;
  return n;
}

StatusOr<size_t> ComputePageBytes(const PagePoolConfig& config) {
  PagePoolConfig one = config;
  PoolGeometry g;
  // The budget only sets the page count: any page size passes with a budget of one page.
  const KvShape& s = config.shape;
  g.row_bytes = KvBytesPerTokenLayer(config.dtype, s.kv_lora_rank, s.rope_dim);
  g.index_row_bytes = IndexRowBytes(config.dtype, s.index_head_dim);
  one.budget_bytes =
      (g.row_bytes * s.num_layers + g.index_row_bytes * s.num_index_layers()) * config.page_tokens;
  ASSIGN_OR_RETURN(g, ComputePoolGeometry(one));
  return g.page_bytes;
}

StatusOr<PoolGeometry> ComputePoolGeometry(const PagePoolConfig& config) {
  const KvShape& s = config.shape;
  if (s.num_layers == 0 || s.row_values() == 0) {
    return Status::InvalidArgument("KV shape needs at least one layer and one value per row");
  }
  if (!s.index_layers.empty() && (s.index_layers.size() != s.num_layers || s.index_head_dim == 0)) {
    return Status::InvalidArgument("KV shape: index_layers needs one flag per layer and index_head_dim > 0");
  }
  if (config.page_tokens == 0 || config.page_tokens > 4096) {
    return Status::InvalidArgument("page_tokens must be in 1..4096, got " +
                                   std::to_string(config.page_tokens));
  }
  PoolGeometry g;
  g.row_bytes = KvBytesPerTokenLayer(config.dtype, s.kv_lora_rank, s.rope_dim);
  g.index_row_bytes = IndexRowBytes(config.dtype, s.index_head_dim);
  g.token_bytes = g.row_bytes * s.num_layers + g.index_row_bytes * s.num_index_layers();
  g.page_bytes = g.token_bytes * config.page_tokens;
  g.num_pages = config.budget_bytes / g.page_bytes;
  if (g.num_pages == 0) {
    return Status::InvalidArgument("KV budget of " + std::to_string(config.budget_bytes) +
                                   " bytes is under one page (" + std::to_string(g.page_bytes) + " bytes)");
  }
  if (g.num_pages >= std::numeric_limits<PageId>::max()) {
    return Status::InvalidArgument("KV budget gives more pages than a PageId can address");
  }
  g.capacity_tokens = g.num_pages * config.page_tokens;
  return g;
}

StatusOr<std::unique_ptr<PagePool>> PagePool::Create(const PagePoolConfig& config) {
  ASSIGN_OR_RETURN(PoolGeometry geometry, ComputePoolGeometry(config));
  if (!config.fp8_layer_scales.empty()) {
    if (config.dtype != KvCacheDtype::kFp8E4M3) {
      return Status::InvalidArgument("fp8_layer_scales given for a bf16 KV cache");
    }
    if (config.fp8_layer_scales.size() != config.shape.num_layers) {
      return Status::InvalidArgument("fp8_layer_scales needs one scale per layer");
    }
    for (float s : config.fp8_layer_scales) {
      if (!(s > 0.0f) || s == std::numeric_limits<float>::infinity()) {
        return Status::InvalidArgument("fp8 KV scales must be finite and > 0");
      }
    }
  }
  std::unique_ptr<PagePool> pool(new PagePool(config, geometry));
  if (pool->data_.data() == nullptr) {
    return Status::ResourceExhausted("cannot allocate " + std::to_string(geometry.used_bytes()) +
                                     " bytes of KV pages");
  }
  return pool;
}

PagePool::PagePool(const PagePoolConfig& config, const PoolGeometry& geometry)
    : config_(config),
      geometry_(geometry),
      data_(geometry.used_bytes()),
      scales_(config.shape.num_layers, 1.0f),
      scale_fixed_(config.shape.num_layers, config.dtype == KvCacheDtype::kBf16 ? 1 : 0) {
  if (!config.fp8_layer_scales.empty()) {
    scales_ = config.fp8_layer_scales;
    scale_fixed_.assign(config.shape.num_layers, 1);
  }
  const size_t tokens = config.page_tokens;
  size_t offset = 0;
  auto add = [&](size_t token_bytes) {
    blocks_.push_back({offset, token_bytes});
    offset += tokens * token_bytes;
  };
  for (size_t l = 0; l < config.shape.num_layers; ++l) {
    block_begin_.push_back(blocks_.size());
    add(geometry.row_bytes);
    if (!config.shape.HasIndexRows(l)) continue;
    if (config.dtype == KvCacheDtype::kBf16) {
      add(geometry.index_row_bytes);
    } else {
      add(config.shape.index_head_dim);
      add(sizeof(float));
    }
  }
  block_begin_.push_back(blocks_.size());
}

size_t PagePool::RowOffset(PageId page, size_t layer, size_t token) const {
  return BlockOffset(page, layer, 0) + token * geometry_.row_bytes;
}

Status PagePool::CheckRange(PageId page, size_t layer, size_t first_token, size_t num_values,
                            size_t row_values) const {
  if (page >= geometry_.num_pages) {
    return Status::OutOfRange("page " + std::to_string(page) + " is outside the pool");
  }
  if (layer >= config_.shape.num_layers) {
    return Status::OutOfRange("layer " + std::to_string(layer) + " is outside the model");
  }
  if (num_values % row_values != 0) {
    return Status::InvalidArgument("row buffer is not a whole number of rows");
  }
  const size_t n = num_values / row_values;
  if (first_token > config_.page_tokens || n > config_.page_tokens - first_token) {
    return Status::OutOfRange("token range runs past the end of the page");
  }
  return Status::Ok();
}

Status PagePool::WriteRows(PageId page, size_t layer, size_t first_token,
                           std::span<const uint16_t> bf16_rows) {
  RETURN_IF_ERROR(CheckRows(page, layer, first_token, bf16_rows.size()));
  if (bf16_rows.empty()) return Status::Ok();
  uint8_t* dst = data_.data() + RowOffset(page, layer, first_token);
  if (config_.dtype == KvCacheDtype::kBf16) {
    std::memcpy(dst, bf16_rows.data(), bf16_rows.size_bytes());
    return Status::Ok();
  }
  RETURN_IF_ERROR(CalibrateLayerScale(layer, bf16_rows));
  ConvertBf16ToFp8E4M3(bf16_rows.data(), dst, bf16_rows.size(), 1.0f / scales_[layer]);
  return Status::Ok();
}

Status PagePool::CalibrateLayerScale(size_t layer, std::span<const uint16_t> bf16_values) {
  if (layer >= config_.shape.num_layers) {
    return Status::OutOfRange("layer " + std::to_string(layer) + " is outside the model");
  }
  if (scale_fixed_[layer] || bf16_values.empty()) return Status::Ok();
  scales_[layer] = Fp8E4M3ScaleForBf16(bf16_values.data(), bf16_values.size());
  scale_fixed_[layer] = 1;
  return Status::Ok();
}

Status PagePool::ReadRows(PageId page, size_t layer, size_t first_token, std::span<uint16_t> out) const {
  RETURN_IF_ERROR(CheckRows(page, layer, first_token, out.size()));
  if (out.empty()) return Status::Ok();
  const uint8_t* src = data_.data() + RowOffset(page, layer, first_token);
  if (config_.dtype == KvCacheDtype::kBf16) {
    std::memcpy(out.data(), src, out.size_bytes());
  } else {
    ConvertFp8E4M3ToBf16(src, out.data(), out.size(), scales_[layer]);
  }
  return Status::Ok();
}

Status PagePool::CheckIndexKeys(PageId page, size_t layer, size_t first_token, size_t num_values) const {
  if (layer < config_.shape.num_layers && !config_.shape.HasIndexRows(layer)) {
    return Status::FailedPrecondition("layer " + std::to_string(layer) + " keeps no DSA indexer keys");
  }
  return CheckRange(page, layer, first_token, num_values, config_.shape.index_head_dim);
}

Status PagePool::WriteIndexKeys(PageId page, size_t layer, size_t first_token, std::span<const float> keys) {
  RETURN_IF_ERROR(CheckIndexKeys(page, layer, first_token, keys.size()));
  const size_t dim = config_.shape.index_head_dim, n = keys.size() / dim;
  if (config_.dtype == KvCacheDtype::kBf16) {
    uint8_t* dst = data_.data() + BlockOffset(page, layer, 1) + first_token * 2 * dim;
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint16_t b = FloatToBf16(keys[i]);
      std::memcpy(dst + 2 * i, &b, 2);
    }
    return Status::Ok();
  }
  uint8_t* codes = data_.data() + BlockOffset(page, layer, 1) + first_token * dim;
  uint8_t* scales = data_.data() + BlockOffset(page, layer, 2) + first_token * sizeof(float);
  for (size_t r = 0; r < n; ++r) {
    const float* row = keys.data() + r * dim;
    float amax = 0.0f;
    for (size_t i = 0; i < dim; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float scale = amax > 0.0f && std::isfinite(amax) ? amax / kFp8E4M3Max : 1.0f;
    const float inv_scale = 1.0f / scale;
    for (size_t i = 0; i < dim; ++i) codes[r * dim + i] = FloatToFp8E4M3(row[i] * inv_scale);
    std::memcpy(scales + r * sizeof(float), &scale, sizeof(float));
  }
  return Status::Ok();
}

Status PagePool::ReadIndexKeys(PageId page, size_t layer, size_t first_token, std::span<float> out) const {
  RETURN_IF_ERROR(CheckIndexKeys(page, layer, first_token, out.size()));
  const size_t dim = config_.shape.index_head_dim, n = out.size() / dim;
  if (config_.dtype == KvCacheDtype::kBf16) {
    const uint8_t* src = data_.data() + BlockOffset(page, layer, 1) + first_token * 2 * dim;
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      out[i] = Bf16ToFloat(b);
    }
    return Status::Ok();
  }
  const uint8_t* codes = data_.data() + BlockOffset(page, layer, 1) + first_token * dim;
  const uint8_t* scales = data_.data() + BlockOffset(page, layer, 2) + first_token * sizeof(float);
  for (size_t r = 0; r < n; ++r) {
    float scale;
    std::memcpy(&scale, scales + r * sizeof(float), sizeof(float));
    for (size_t i = 0; i < dim; ++i) out[r * dim + i] = Fp8E4M3ToFloat(codes[r * dim + i]) * scale;
  }
  return Status::Ok();
}

StatusOr<const uint8_t*> PagePool::LatentRowsInPlace(PageId page, size_t layer) const {
  RETURN_IF_ERROR(CheckRows(page, layer, 0, 0));
  return data_.data() + RowOffset(page, layer, 0);  // bf16 rows are 2-byte aligned (even offsets)
}

void PagePool::ClearTokenSlots(std::span<uint8_t> page, size_t first_token) const {
  TANDEM_CHECK(page.size() == geometry_.page_bytes && first_token <= config_.page_tokens);
  const size_t tail_tokens = config_.page_tokens - first_token;
  if (tail_tokens == 0) return;
  for (const TokenBlock& b : blocks_) {  // every layer's latent and indexer rows
    std::memset(page.data() + b.offset + first_token * b.token_bytes, 0, tail_tokens * b.token_bytes);
  }
}

std::span<uint8_t> PagePool::PageBytes(PageId page) {
  return {data_.data() + static_cast<size_t>(page) * geometry_.page_bytes, geometry_.page_bytes};
}

std::span<const uint8_t> PagePool::PageBytes(PageId page) const {
  return {data_.data() + static_cast<size_t>(page) * geometry_.page_bytes, geometry_.page_bytes};
}

}  // namespace tandem::engine::kv
