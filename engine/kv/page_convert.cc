#include "engine/kv/page_convert.h"

#include <algorithm>
#include <cstring>

namespace tandem::engine::kv {

StatusOr<KvLayout> LayoutOf(const PagePool& pool) {
  KvLayout layout;
  layout.shape = pool.config().shape;
  layout.dtype = pool.dtype();
  layout.page_tokens = pool.page_tokens();
  layout.page_bytes = pool.geometry().page_bytes;
  if (pool.dtype() == KvCacheDtype::kFp8E4M3) {
    for (size_t l = 0; l < layout.shape.num_layers; ++l) {
      if (!pool.layer_scale_fixed(l)) {
        return Status::FailedPrecondition("the FP8 KV scale of layer " + std::to_string(l) +
                                          " is not fixed yet (calibrate the pool before it receives pages)");
      }
      layout.fp8_layer_scales.push_back(pool.layer_scale(l));
    }
  }
  return layout;
}

std::string DescribeLayout(const KvLayout& layout) {
  return std::string(KvCacheDtypeName(layout.dtype)) + ", " + std::to_string(layout.shape.num_layers) +
         " layers x (" + std::to_string(layout.shape.kv_lora_rank) + " + " +
         std::to_string(layout.shape.rope_dim) + "), " + std::to_string(layout.page_tokens) +
         " tokens per page";
}

StatusOr<std::unique_ptr<PageConverter>> PageConverter::Create(const PagePool& source,
                                                               const KvLayout& target) {
  const KvShape& s = source.config().shape;
  const KvShape& t = target.shape;
  KvLayout own;
  own.shape = s;
  own.dtype = source.dtype();
  own.page_tokens = source.page_tokens();
  if (!(s == t) || source.page_tokens() != target.page_tokens) {
    return Status::InvalidArgument("the target KV layout (" + DescribeLayout(target) +
                                   ") cannot take pages of this pool (" + DescribeLayout(own) + ")");
  }
  PagePoolConfig pc;
  pc.shape = t;
  pc.dtype = target.dtype;
  pc.page_tokens = target.page_tokens;
  pc.budget_bytes = 1;
  if (target.dtype == KvCacheDtype::kFp8E4M3) pc.fp8_layer_scales = target.fp8_layer_scales;
  ASSIGN_OR_RETURN(const size_t page_bytes, ComputePageBytes(pc));
  if (page_bytes != target.page_bytes) {
    return Status::InvalidArgument("the target KV layout (" + DescribeLayout(target) + ") says " +
                                   std::to_string(target.page_bytes) + " bytes per page, its shape needs " +
                                   std::to_string(page_bytes));
  }
  if (target.dtype == KvCacheDtype::kFp8E4M3 && target.fp8_layer_scales.size() != t.num_layers) {
    return Status::InvalidArgument("an FP8 target KV layout needs one scale per layer");
  }
  if (target.dtype == KvCacheDtype::kBf16 && !target.fp8_layer_scales.empty()) {
    return Status::InvalidArgument("a BF16 target KV layout carries no FP8 scales");
  }
  std::unique_ptr<PageConverter> c(new PageConverter(source, target));
  bool same = source.dtype() == target.dtype;
  for (size_t l = 0; same && target.dtype == KvCacheDtype::kFp8E4M3 && l < t.num_layers; ++l) {
    same = source.layer_scale_fixed(l) && source.layer_scale(l) == target.fp8_layer_scales[l];
  }
  if (same) return c;
  pc.budget_bytes = page_bytes;
  ASSIGN_OR_RETURN(c->scratch_, PagePool::Create(pc));  // InvalidArgument for a bad scale
  c->rows_.resize(target.page_tokens * t.row_values());
  c->keys_.resize(target.page_tokens * t.index_head_dim);
  return c;
}

Status PageConverter::Convert(PageId page, size_t valid_tokens, std::span<uint8_t> out) {
  if (out.size() != target_.page_bytes) {
    return Status::InvalidArgument("a converted page is " + std::to_string(target_.page_bytes) +
                                   " bytes, the buffer has " + std::to_string(out.size()));
  }
  if (scratch_ == nullptr) {
    const std::span<const uint8_t> bytes = source_.PageBytes(page);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    source_.ClearTokenSlots(out, valid_tokens);
    return Status::Ok();
  }
  const size_t row_values = target_.shape.row_values();
  const std::span<uint16_t> rows(rows_.data(), valid_tokens * row_values);
  const std::span<float> keys(keys_.data(), valid_tokens * target_.shape.index_head_dim);
  for (size_t layer = 0; layer < target_.shape.num_layers; ++layer) {
    RETURN_IF_ERROR(source_.ReadRows(page, layer, 0, rows));
    RETURN_IF_ERROR(scratch_->WriteRows(0, layer, 0, rows));
    if (target_.shape.HasIndexRows(layer)) {
      RETURN_IF_ERROR(source_.ReadIndexKeys(page, layer, 0, keys));
      RETURN_IF_ERROR(scratch_->WriteIndexKeys(0, layer, 0, keys));
    }
  }
  const std::span<const uint8_t> bytes = scratch_->PageBytes(0);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  scratch_->ClearTokenSlots(out, valid_tokens);
  return Status::Ok();
}

}  // namespace tandem::engine::kv
