#include "engine/kernels/cpu/mla_prefill.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/core/cpu_features.h"
#include "engine/kernels/cpu/mla_prefill_internal.h"
#include "engine/kernels/cpu/mla_prefill_tiles.h"
#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = kMlaPrefillKeyBlock;
// Queries of one head that share each key block (its transposed keys built once for them).
constexpr int64_t kQueryTile = 16;

bool Sees(const MlaPrefillInput& in, int64_t i, int64_t j) {
  return j <= in.past + i && (in.mask == nullptr || in.mask[i * in.context() + j] != 0);
}

void PortableScores(const float* const* q, int64_t nq, const float* kt, int64_t width, float* s) {
  prefill_tiles::Scores<4, 16>(q, nq, kt, width, s);
}

void PortableSums(const float* p, int64_t nq, const float* v, int64_t v_stride, int64_t n, int64_t vdim,
                  float* const* o) {
  prefill_tiles::Sums<4, 16>(p, nq, v, v_stride, n, vdim, o);
}

struct Loops {
  PrefillScoresFn scores;
  PrefillSumsFn sums;
};

Loops ActiveLoops() {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (ActiveKernelIsa() == KernelIsa::kAvx512) return {avx512::PrefillScores, avx512::PrefillSums};
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (ActiveKernelIsa() >= KernelIsa::kAvx2) return {avx2::PrefillScores, avx2::PrefillSums};
#endif
  return {PortableScores, PortableSums};
}

// Per-thread scratch of Tile.
struct Scratch {
  std::vector<float> kt;      // [width][kBlock]: a key block transposed
  std::vector<float> scores;  // [kQueryTile][kBlock]
};

// Queries [i0, i1) of head h (i1 - i0 <= kQueryTile).
void Tile(const MlaPrefillInput& in, const MlaPrefillShape& shape, const Loops& loops, int64_t h, int64_t i0,
          int64_t i1, Scratch* scratch, float* out) {
  const int64_t heads = shape.heads, nope = shape.nope, rope = shape.rope, vdim = shape.v;
  const int64_t width = nope + rope, per_head = nope + vdim, nq = i1 - i0;
  scratch->kt.resize(width * kBlock);
  scratch->scores.resize(kQueryTile * kBlock);
  float* kt = scratch->kt.data();
  float* s = scratch->scores.data();
  std::array<const float*, kQueryTile> q;
  std::array<float*, kQueryTile> o;
  std::array<float, kQueryTile> m, l;
  for (int64_t t = 0; t < nq; ++t) {
    q[t] = in.q + ((i0 + t) * heads + h) * width;
    o[t] = out + ((i0 + t) * heads + h) * vdim;
    std::fill_n(o[t], vdim, 0.0f);
    m[t] = kNegInf;
    l[t] = 0.0f;
  }
  const int64_t keys = in.past + i1;  // the tile's last query sees keys [0, keys) at most
  for (int64_t b0 = 0; b0 < keys; b0 += kBlock) {
    const int64_t n = std::min(kBlock, keys - b0);
    for (int64_t j = 0; j < n; ++j) {
      const float* k = in.kv + ((b0 + j) * heads + h) * per_head;
      const float* kr = in.k_rope + (b0 + j) * in.k_rope_stride;
      for (int64_t d = 0; d < nope; ++d) kt[d * kBlock + j] = k[d];
      for (int64_t d = 0; d < rope; ++d) kt[(nope + d) * kBlock + j] = kr[d];
    }
    if (n < kBlock) {
      for (int64_t d = 0; d < width; ++d) std::fill(kt + d * kBlock + n, kt + (d + 1) * kBlock, 0.0f);
    }
    loops.scores(q.data(), nq, kt, width, s);
    for (int64_t t = 0; t < nq; ++t) {
      const int64_t i = i0 + t, end = std::min(b0 + n, in.past + i + 1);
      float* st = s + t * kBlock;
      float block_max = kNegInf;
      for (int64_t j = b0; j < end; ++j) {
        const float x = Sees(in, i, j) ? st[j - b0] * shape.scale : kNegInf;
        st[j - b0] = x;
        block_max = std::max(block_max, x);
      }
      if (block_max == kNegInf) {  // sees none of this block: adds nothing
        std::fill(st, st + n, 0.0f);
        continue;
      }
      if (block_max > m[t]) {
        if (l[t] > 0.0f) {  // rescale what earlier blocks summed to the new maximum
          const float c = std::exp(m[t] - block_max);
          l[t] *= c;
          for (int64_t d = 0; d < vdim; ++d) o[t][d] *= c;
        }
        m[t] = block_max;
      }
      const int64_t seen = end - b0;                     // >= 1: the block has a visible key
      for (int64_t j = 0; j < seen; ++j) st[j] -= m[t];  // -inf stays -inf: e^-inf is 0
      ExpF32(st, st, seen);
      std::fill(st + seen, st + n, 0.0f);  // keys past the query's position
      for (int64_t j = 0; j < seen; ++j) l[t] += st[j];
    }
    loops.sums(s, nq, in.kv + (b0 * heads + h) * per_head + nope, heads * per_head, n, vdim, o.data());
  }
  for (int64_t t = 0; t < nq; ++t) {
    if (l[t] == 0.0f) continue;  // sees no key: zeros
    for (int64_t d = 0; d < vdim; ++d) o[t][d] /= l[t];
  }
}

}  // namespace

void MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, ThreadPool* pool, float* out) {
  if (in.num_new <= 0 || shape.heads <= 0) return;
  const int64_t tiles = (in.num_new + kQueryTile - 1) / kQueryTile;
  const Loops loops = ActiveLoops();
  // Work item k: head k / tiles and a tile taken from both ends in turn (first, last, second,
  // ...), so that the contiguous chunks ParallelFor hands out mix short and long causal rows.
  pool->ParallelFor(shape.heads * tiles, 1, [&](int64_t begin, int64_t end, int) {
    Scratch scratch;
    for (int64_t k = begin; k < end; ++k) {
      const int64_t h = k / tiles, pos = k % tiles;
      const int64_t tile = pos % 2 == 0 ? pos / 2 : tiles - 1 - pos / 2;
      const int64_t i0 = tile * kQueryTile;
      Tile(in, shape, loops, h, i0, std::min(in.num_new, i0 + kQueryTile), &scratch, out);
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
