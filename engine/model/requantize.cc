#include "engine/model/requantize.h"

#include <vector>

#include "engine/formats/float_codecs.h"
#include "engine/formats/weights.h"
#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::model {
namespace {

// A Linear's values as fp32 [rows, cols], through the kernel (identity · Wᵀ, then transposed).
std::vector<float> Dequantize(const PackedWeight& w, ThreadPool* pool) {
  const int64_t n = w.rows(), k = w.cols();
  std::vector<float> eye(k * k, 0.0f), t(k * n), out(n * k);
  for (int64_t i = 0; i < k; ++i) eye[i * k + i] = 1.0f;
  (void)kernels::cpu::Matmul(w, eye.data(), k, t.data(), pool);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t r = 0; r < n; ++r) out[r * k + i] = t[i * n + r];
  }
  return out;
}

Status Requantize(PackedWeight* w, WeightFormat to, ThreadPool* pool) {
  if (w->rows() == 0 || w->format() == to) return Status::Ok();
  const int64_t n = w->rows(), k = w->cols();
  const std::vector<float> v = Dequantize(*w, pool);
  if (to == WeightFormat::kInt4Group32) {
    std::vector<int32_t> packed(n * Int4PackedCols(k));
    std::vector<uint16_t> scale(n * Int4ScaleCols(k));
    QuantizeInt4Group32Ref(v.data(), n, k, packed.data(), scale.data());
    ASSIGN_OR_RETURN(*w, PackedWeight::FromInt4({packed.data(), scale.data(), n, k}));
  } else {
    std::vector<uint8_t> data(n * k);
    std::vector<float> scale(Fp8ScaleRows(n) * Fp8ScaleCols(k));
    QuantizeFp8Block128Ref(v.data(), n, k, data.data(), scale.data());
    ASSIGN_OR_RETURN(*w, PackedWeight::FromFp8({data.data(), scale.data(), n, k}));
  }
  return Status::Ok();
}

}  // namespace

Status RequantizeModel(ModelWeights* m, WeightFormat to, ThreadPool* pool) {
  auto mlp = [&](MlpWeights& w, WeightFormat f) -> Status {
    for (PackedWeight* p : {&w.gate_proj, &w.up_proj, &w.down_proj}) RETURN_IF_ERROR(Requantize(p, f, pool));
    return Status::Ok();
  };
  if (to == WeightFormat::kBf16) return Status::Ok();
  const WeightFormat fp8 = WeightFormat::kFp8Block128;
  for (LayerWeights& l : m->layers) {
    for (MlpWeights& e : l.moe.experts) RETURN_IF_ERROR(mlp(e, to));
    if (to == WeightFormat::kInt4Group32) continue;
    MlaWeights& a = l.attn;
    for (PackedWeight* p :
         {&a.q_proj, &a.q_a_proj, &a.q_b_proj, &a.kv_a_proj_with_mqa, &a.kv_b_proj, &a.o_proj}) {
      RETURN_IF_ERROR(Requantize(p, fp8, pool));
    }
    RETURN_IF_ERROR(mlp(l.dense_mlp, fp8));
    RETURN_IF_ERROR(mlp(l.moe.shared_experts, fp8));
  }
  return Status::Ok();
}

}  // namespace tandem::engine::model
