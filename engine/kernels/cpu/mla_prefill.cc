#include "engine/kernels/cpu/mla_prefill.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Queries of one head that share each pass over a key block (the block's keys stay in cache).
constexpr int64_t kQueryTile = 8;

bool Sees(const MlaPrefillInput& in, int64_t i, int64_t j) {
  return j <= in.past + i && (in.mask == nullptr || in.mask[i * in.context() + j] != 0);
}

// Queries [i0, i1) of head h (i1 - i0 <= kQueryTile).
void Tile(const MlaPrefillInput& in, const MlaPrefillShape& shape, int64_t h, int64_t i0, int64_t i1,
          float* out) {
  const int64_t heads = shape.heads, nope = shape.nope, vdim = shape.v;
  const int64_t qk = nope + shape.rope, per_head = nope + vdim, block = kMlaPrefillKeyBlock;
  std::array<float, kQueryTile * kMlaPrefillKeyBlock> scores;
  std::array<float, kQueryTile> m, l;
  m.fill(kNegInf);
  l.fill(0.0f);
  for (int64_t i = i0; i < i1; ++i) std::fill_n(out + (i * heads + h) * vdim, vdim, 0.0f);
  const int64_t keys = in.past + i1;  // the tile's last query sees keys [0, keys) at most
  for (int64_t b0 = 0; b0 < keys; b0 += block) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i - i0, end = std::min(b0 + block, in.past + i + 1);
      if (end <= b0) continue;
      float* s = scores.data() + t * block;
      const float* q = in.q + (i * heads + h) * qk;
      float block_max = kNegInf;
      for (int64_t j = b0; j < end; ++j) {
        if (!Sees(in, i, j)) {
          s[j - b0] = kNegInf;
          continue;
        }
        const float* k = in.kv + (j * heads + h) * per_head;
        const float x = static_cast<float>((static_cast<double>(DotF32(q, k, nope)) +
                                            DotF32(q + nope, in.k_rope + j * in.k_rope_stride, shape.rope)) *
                                           shape.scale);
        s[j - b0] = x;
        block_max = std::max(block_max, x);
      }
      if (block_max == kNegInf) continue;  // sees none of this block
      float* o = out + (i * heads + h) * vdim;
      if (block_max > m[t]) {
        if (l[t] > 0.0f) {  // rescale what earlier blocks summed to the new maximum
          const float c = std::exp(m[t] - block_max);
          l[t] *= c;
          for (int64_t d = 0; d < vdim; ++d) o[d] *= c;
        }
        m[t] = block_max;
      }
      const int64_t n = end - b0;
      for (int64_t j = 0; j < n; ++j) s[j] -= m[t];  // -inf stays -inf: e^-inf is 0
      ExpF32(s, s, n);
      for (int64_t j = 0; j < n; ++j) {
        if (s[j] == 0.0f) continue;
        l[t] += s[j];
        AddScaledF32(s[j], in.kv + ((b0 + j) * heads + h) * per_head + nope, o, vdim);
      }
    }
  }
  for (int64_t i = i0; i < i1; ++i) {
    const float sum = l[i - i0];
    if (sum == 0.0f) continue;  // sees no key: zeros
    float* o = out + (i * heads + h) * vdim;
    for (int64_t d = 0; d < vdim; ++d) o[d] /= sum;
  }
}

}  // namespace

void MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, ThreadPool* pool, float* out) {
  if (in.num_new <= 0 || shape.heads <= 0) return;
  const int64_t tiles = (in.num_new + kQueryTile - 1) / kQueryTile;
  // Work item k: head k / tiles and a tile taken from both ends in turn (first, last, second,
  // ...), so that the contiguous chunks ParallelFor hands out mix short and long causal rows.
  pool->ParallelFor(shape.heads * tiles, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t h = k / tiles, pos = k % tiles;
      const int64_t tile = pos % 2 == 0 ? pos / 2 : tiles - 1 - pos / 2;
      const int64_t i0 = tile * kQueryTile;
      Tile(in, shape, h, i0, std::min(in.num_new, i0 + kQueryTile), out);
    }
  });
}

void MlaPrefillRef(const MlaPrefillInput& in, const MlaPrefillShape& shape, float* out) {
  const int64_t heads = shape.heads, nope = shape.nope, vdim = shape.v;
  const int64_t qk = nope + shape.rope, per_head = nope + vdim, context = in.context();
  std::vector<double> s(context), o(vdim);
  for (int64_t i = 0; i < in.num_new; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* q = in.q + (i * heads + h) * qk;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < context; ++j) {
        if (!Sees(in, i, j)) continue;
        const float* k = in.kv + (j * heads + h) * per_head;
        const float* kr = in.k_rope + j * in.k_rope_stride;
        double dot = 0;
        for (int64_t d = 0; d < nope; ++d) dot += static_cast<double>(q[d]) * k[d];
        for (int64_t d = 0; d < shape.rope; ++d) dot += static_cast<double>(q[nope + d]) * kr[d];
        s[j] = dot * shape.scale;
        max = std::max(max, s[j]);
      }
      double sum = 0;
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j < context; ++j) {
        if (!Sees(in, i, j)) continue;
        const double e = std::exp(s[j] - max);
        sum += e;
        const float* v = in.kv + (j * heads + h) * per_head + nope;
        for (int64_t d = 0; d < vdim; ++d) o[d] += e * v[d];
      }
      float* dst = out + (i * heads + h) * vdim;
      for (int64_t d = 0; d < vdim; ++d) dst[d] = sum == 0 ? 0.0f : static_cast<float>(o[d] / sum);
    }
  }
}

}  // namespace tandem::engine::kernels::cpu
