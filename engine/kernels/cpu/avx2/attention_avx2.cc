// AVX2 + FMA + F16C attention kernels over cached rows (engine/kernels/cpu/attention.h).
// Compiled with the AVX2 kernel flags and -ffp-contract=off (the weighted sums promise
// multiply-then-add bits); attention.cc calls them only when ActiveKernelIsa() is kAvx2 or wider.
//
// A row chunk of 8 elements is widened once into fp32 and used for every query (scores) or every
// weight vector (sums) of the call: bf16 by a shift, e4m3 through fp16 (vcvtph2ps), both exact.
#include <algorithm>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/attention_internal.h"
#include "engine/kernels/cpu/avx2/simd_avx2.h"

namespace tandem::engine::kernels::cpu::avx2 {
namespace {

// Elements [at, at + 8) of a run as fp32: bf16 exactly; e4m3 as value · 2^-8 (exactly), the 2^8
// applied once per score or per weight by the callers (a power of two: the same bits).
template <RowFormat F>
inline __m256 Load8(const void* data, int64_t at) {
  if constexpr (F == RowFormat::kBf16) {
    return LoadBf16x8(static_cast<const uint16_t*>(data) + at);
  } else {
    const __m128i codes =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(data) + at));
    const __m128i high = _mm_slli_epi16(_mm_cvtepu8_epi16(codes), 8);
    const __m128i half = _mm_and_si128(_mm_srai_epi16(high, 1), _mm_set1_epi16(static_cast<int16_t>(0xbfff)));
    return _mm256_cvtph_ps(half);
  }
}

template <RowFormat F>
constexpr float kLoadScale = F == RowFormat::kBf16 ? 1.0f : 256.0f;

template <RowFormat F>
constexpr int64_t kElementBytes = F == RowFormat::kBf16 ? 2 : 1;

constexpr int64_t kRowsAhead = 3;

// NQ queries against each row: chunk c of 8 goes to chain c % 2 of its (row, query) pair; a last
// partial chunk is read zero-padded (row and queries). Whatever NQ, a pair's sum is computed the
// same way.
template <int NQ, RowFormat F>
void Scores(const float* q, int64_t q_stride, RowsRef rows, int64_t n, int64_t width, float* out,
            int64_t out_stride) {
  const int64_t full = width / 8, tail = width % 8;
  const char* base = static_cast<const char*>(rows.data);
  const int64_t row_bytes = rows.stride * kElementBytes<F>;
  alignas(32) float q_tail[NQ][8] = {};
  for (int h = 0; h < NQ; ++h)
    for (int64_t e = 0; e < tail; ++e) q_tail[h][e] = q[h * q_stride + full * 8 + e];
  for (int64_t j = 0; j < n; ++j) {
    const void* r = base + j * row_bytes;
    if (j + kRowsAhead < n) {
      const char* ahead = base + (j + kRowsAhead) * row_bytes;
      for (int64_t b = 0; b < width * kElementBytes<F>; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
    }
    __m256 acc0[NQ], acc1[NQ];
    for (int h = 0; h < NQ; ++h) acc0[h] = acc1[h] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 2 <= full; c += 2) {
      const __m256 v0 = Load8<F>(r, 8 * c);
      const __m256 v1 = Load8<F>(r, 8 * c + 8);
      for (int h = 0; h < NQ; ++h) {
        acc0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * q_stride + 8 * c), v0, acc0[h]);
        acc1[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * q_stride + 8 * c + 8), v1, acc1[h]);
      }
    }
    if (c < full) {  // an odd last full chunk: the even chain
      const __m256 v = Load8<F>(r, 8 * c);
      for (int h = 0; h < NQ; ++h)
        acc0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * q_stride + 8 * c), v, acc0[h]);
      ++c;
    }
    if (tail > 0) {  // chunk `full`, zero-padded, on its chain
      alignas(32) float row_tail[8] = {};
      for (int64_t e = 0; e < tail; ++e) row_tail[e] = RowValue(rows, j, full * 8 + e) / kLoadScale<F>;
      const __m256 v = _mm256_load_ps(row_tail);
      for (int h = 0; h < NQ; ++h) {
        __m256& acc = full % 2 == 0 ? acc0[h] : acc1[h];
        acc = _mm256_fmadd_ps(_mm256_load_ps(q_tail[h]), v, acc);
      }
    }
    for (int h = 0; h < NQ; ++h)
      out[h * out_stride + j] = HorizontalSum(_mm256_add_ps(acc0[h], acc1[h])) * kLoadScale<F>;
  }
}

// NW weight vectors over the same rows, 4 vectors (32 values) of each output per pass, the rest
// of dim scalar; every output element is its own sum over the rows in order, multiply then add.
template <int NW, RowFormat F>
void WeightedSums(const float* w, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim, float* out,
                  int64_t out_stride) {
  const char* base = static_cast<const char*>(rows.data);
  const int64_t row_bytes = rows.stride * kElementBytes<F>;
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) {
    __m256 acc[NW][4];
    for (int h = 0; h < NW; ++h)
      for (int k = 0; k < 4; ++k) acc[h][k] = _mm256_loadu_ps(out + h * out_stride + d + 8 * k);
    for (int64_t j = 0; j < n; ++j) {
      const void* row = base + j * row_bytes;
      __m256 v[4];
      for (int k = 0; k < 4; ++k) v[k] = Load8<F>(row, d + 8 * k);
      for (int h = 0; h < NW; ++h) {
        const float wh = w[h * w_stride + j];
        if (wh == 0.0f) continue;
        const __m256 b = _mm256_set1_ps(wh * kLoadScale<F>);
        for (int k = 0; k < 4; ++k) acc[h][k] = _mm256_add_ps(acc[h][k], _mm256_mul_ps(b, v[k]));
      }
    }
    for (int h = 0; h < NW; ++h)
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + h * out_stride + d + 8 * k, acc[h][k]);
  }
  if (d == dim) return;
  for (int h = 0; h < NW; ++h) {
    float* o = out + h * out_stride;
    for (int64_t j = 0; j < n; ++j) {
      const float wh = w[h * w_stride + j];
      if (wh == 0.0f) continue;
      for (int64_t e = d; e < dim; ++e) o[e] += wh * RowValue(rows, j, e);
    }
  }
}

}  // namespace

void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                     float* out, int64_t out_stride) {
  InGroupsOf4(nq, [&](int64_t h, auto k) {
    constexpr int kQ = decltype(k)::value;
    if (rows.format == RowFormat::kBf16) {
      Scores<kQ, RowFormat::kBf16>(q + h * q_stride, q_stride, rows, n, width, out + h * out_stride,
                                   out_stride);
    } else {
      Scores<kQ, RowFormat::kFp8E4M3>(q + h * q_stride, q_stride, rows, n, width, out + h * out_stride,
                                      out_stride);
    }
  });
}

void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                           float* out, int64_t out_stride) {
  InGroupsOf4(nw, [&](int64_t h, auto k) {
    constexpr int kW = decltype(k)::value;
    if (rows.format == RowFormat::kBf16) {
      WeightedSums<kW, RowFormat::kBf16>(w + h * w_stride, w_stride, rows, n, dim, out + h * out_stride,
                                         out_stride);
    } else {
      WeightedSums<kW, RowFormat::kFp8E4M3>(w + h * w_stride, w_stride, rows, n, dim, out + h * out_stride,
                                            out_stride);
    }
  });
}

void Fp8RowsToBf16(RowsRef rows, int64_t n, int64_t width, uint16_t* out) {
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* r = static_cast<const uint8_t*>(rows.data) + j * rows.stride;
    uint16_t* o = out + j * width;
    int64_t d = 0;
    for (; d + 8 <= width; d += 8) {
      // value · 2^-8 in fp32, then · 2^8 (exact), whose upper half is the value's bf16 (exact:
      // an e4m3 value has 4 significant bits).
      const __m256 v = _mm256_mul_ps(Load8<RowFormat::kFp8E4M3>(r, d), _mm256_set1_ps(256.0f));
      const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
      const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + d), packed);
    }
    for (; d < width; ++d) o[d] = FloatToBf16(RowValue(rows, j, d));
  }
}

}  // namespace tandem::engine::kernels::cpu::avx2
