#include "engine/kv/page_pool.h"

#include <cstring>
#include <limits>
#include <string>

#include "engine/formats/convert.h"

namespace tandem::engine::kv {

StatusOr<PoolGeometry> ComputePoolGeometry(const PagePoolConfig& config) {
  const KvShape& s = config.shape;
  if (s.num_layers == 0 || s.row_values() == 0) {
    return Status::InvalidArgument("KV shape needs at least one layer and one value per row");
  }
  if (config.page_tokens == 0 || config.page_tokens > 4096) {
    return Status::InvalidArgument("page_tokens must be in 1..4096, got " +
                                   std::to_string(config.page_tokens));
  }
  PoolGeometry g;
  g.row_bytes = KvBytesPerTokenLayer(config.dtype, s.kv_lora_rank, s.rope_dim);
  g.page_bytes = g.row_bytes * s.num_layers * config.page_tokens;
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
}

size_t PagePool::RowOffset(PageId page, size_t layer, size_t token) const {
  return static_cast<size_t>(page) * geometry_.page_bytes +
         (layer * config_.page_tokens + token) * geometry_.row_bytes;
}

Status PagePool::CheckRows(PageId page, size_t layer, size_t first_token, size_t num_values) const {
  const size_t row_values = config_.shape.row_values();
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
  ConvertBf16ToFp8E4M3Ref(bf16_rows.data(), dst, bf16_rows.size(), 1.0f / scales_[layer]);
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

StatusOr<const uint16_t*> PagePool::Bf16RowsInPlace(PageId page, size_t layer) const {
  if (config_.dtype != KvCacheDtype::kBf16)
    return Status::FailedPrecondition("in-place bf16 rows: the pool stores fp8_e4m3 pages");
  RETURN_IF_ERROR(CheckRows(page, layer, 0, 0));
  // Rows are 2-byte aligned: page_bytes and row_bytes are even for bf16 pools.
  return reinterpret_cast<const uint16_t*>(data_.data() + RowOffset(page, layer, 0));
}

std::span<uint8_t> PagePool::PageBytes(PageId page) {
  return {data_.data() + static_cast<size_t>(page) * geometry_.page_bytes, geometry_.page_bytes};
}

std::span<const uint8_t> PagePool::PageBytes(PageId page) const {
  return {data_.data() + static_cast<size_t>(page) * geometry_.page_bytes, geometry_.page_bytes};
}

}  // namespace tandem::engine::kv
