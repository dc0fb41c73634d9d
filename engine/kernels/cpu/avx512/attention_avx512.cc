// AVX-512 attention kernels over cached rows (engine/kernels/cpu/attention.h). Compiled with the
// AVX-512 kernel flags and -ffp-contract=off (the weighted sums promise multiply-then-add bits);
// attention.cc calls them only when ActiveKernelIsa() is kAvx512.
//
// A row chunk of 16 elements is widened once into fp32 and used for every query (scores) or every
// weight vector (sums) of the call: bf16 by a shift, e4m3 through fp16 (vcvtph2ps), both exact.
#include "engine/kernels/cpu/attention_internal.h"
#include "engine/kernels/cpu/avx512/simd_avx512.h"

namespace tandem::engine::kernels::cpu::avx512 {
namespace {

constexpr __mmask16 kAll = static_cast<__mmask16>(0xffff);

// Elements [at, at + 16) of a run (lanes outside m read as 0) as fp32: bf16 exactly; e4m3 as
// value · 2^-8 (exactly: fp16 of the code's fields), the 2^8 applied once per score or per weight
// by the callers (a power of two: the same bits as scaling each element).
template <RowFormat F>
inline __m512 Load16(const void* data, int64_t at, __mmask16 m) {
  if constexpr (F == RowFormat::kBf16) {
    const __m256i bits = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(data) + at);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  } else {
    // The code in each word's high byte, then fp16 of value · 2^-8 (sign kept in bit 15, exponent
    // and mantissa shifted into fp16's fields, whose bias is 8 larger): exact, subnormals included.
    const __m128i codes = _mm_maskz_loadu_epi8(m, static_cast<const uint8_t*>(data) + at);
    const __m256i high = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8);
    const __m256i half =
        _mm256_and_si256(_mm256_srai_epi16(high, 1), _mm256_set1_epi16(static_cast<int16_t>(0xbfff)));
    return _mm512_cvtph_ps(half);
  }
}

// What Load16's values are multiplied by to give the elements' values.
template <RowFormat F>
constexpr float kLoadScale = F == RowFormat::kBf16 ? 1.0f : 256.0f;

template <RowFormat F>
constexpr int64_t kElementBytes = F == RowFormat::kBf16 ? 2 : 1;

// How many rows ahead the scores prefetch (3 rows of the real models' 576 values: 3.4 KB in bf16).
constexpr int64_t kRowsAhead = 3;

// NQ queries against each row: chunk c of 16 goes to chain c % 2 of its (row, query) pair, the
// last partial chunk masked; whatever NQ, a pair's sum is computed the same way.
template <int NQ, RowFormat F>
void Scores(const float* q, int64_t q_stride, RowsRef rows, int64_t n, int64_t width, float* out,
            int64_t out_stride) {
  const int64_t chunks = (width + 15) / 16;
  const __mmask16 last = Mask16(width - 16 * (chunks - 1));
  const char* base = static_cast<const char*>(rows.data);
  const int64_t row_bytes = rows.stride * kElementBytes<F>;
  for (int64_t j = 0; j < n; ++j) {
    const void* r = base + j * row_bytes;
    // The row kRowsAhead on, line by line: a page's rows are one contiguous run, read cold from
    // DRAM at batch 1, and the hardware prefetcher alone left this loop waiting on each line.
    if (j + kRowsAhead < n) {
      const char* ahead = base + (j + kRowsAhead) * row_bytes;
      for (int64_t b = 0; b < width * kElementBytes<F>; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
    }
    __m512 acc0[NQ], acc1[NQ];  // chains of the even and odd chunks (fixed indices: kept in registers)
    for (int h = 0; h < NQ; ++h) acc0[h] = acc1[h] = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 2 < chunks; c += 2) {
      const __m512 v0 = Load16<F>(r, 16 * c, kAll);
      const __m512 v1 = Load16<F>(r, 16 * c + 16, kAll);
      for (int h = 0; h < NQ; ++h) {
        acc0[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * q_stride + 16 * c), v0, acc0[h]);
        acc1[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * q_stride + 16 * c + 16), v1, acc1[h]);
      }
    }
    for (; c < chunks; ++c) {  // the last one or two chunks, the very last one masked
      const __mmask16 m = c + 1 == chunks ? last : kAll;
      const __m512 v = Load16<F>(r, 16 * c, m);
      for (int h = 0; h < NQ; ++h) {
        const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * q_stride + 16 * c);
        if (c % 2 == 0) {
          acc0[h] = _mm512_fmadd_ps(qv, v, acc0[h]);
        } else {
          acc1[h] = _mm512_fmadd_ps(qv, v, acc1[h]);
        }
      }
    }
    for (int h = 0; h < NQ; ++h)
      out[h * out_stride + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[h], acc1[h])) * kLoadScale<F>;
  }
}

// NW weight vectors over the same rows, V vectors of 16 lanes of each output per pass (the last
// ones masked): a row chunk is widened once for all NW outputs. Every output element is its own
// sum over the rows in order, multiply then add: the same whatever NW and V.
template <int NW, int V, RowFormat F>
void WeightedSums(const float* w, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim, float* out,
                  int64_t out_stride) {
  const char* base = static_cast<const char*>(rows.data);
  const int64_t row_bytes = rows.stride * kElementBytes<F>;
  for (int64_t d = 0; d < dim; d += 16 * V) {
    __mmask16 m[V];
    for (int k = 0; k < V; ++k) m[k] = Mask16(dim - d - 16 * k);
    __m512 acc[NW][V];
    for (int h = 0; h < NW; ++h)
      for (int k = 0; k < V; ++k) acc[h][k] = _mm512_maskz_loadu_ps(m[k], out + h * out_stride + d + 16 * k);
    for (int64_t j = 0; j < n; ++j) {
      const void* row = base + j * row_bytes;
      __m512 v[V];
      for (int k = 0; k < V; ++k) v[k] = Load16<F>(row, d + 16 * k, m[k]);
      for (int h = 0; h < NW; ++h) {
        const float wh = w[h * w_stride + j];
        if (wh == 0.0f) continue;
        const __m512 b = _mm512_set1_ps(wh * kLoadScale<F>);
        for (int k = 0; k < V; ++k) acc[h][k] = _mm512_add_ps(acc[h][k], _mm512_mul_ps(b, v[k]));
      }
    }
    for (int h = 0; h < NW; ++h)
      for (int k = 0; k < V; ++k) _mm512_mask_storeu_ps(out + h * out_stride + d + 16 * k, m[k], acc[h][k]);
  }
}

template <RowFormat F>
void ScoresOf(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
              float* out, int64_t out_stride) {
  InGroupsOf4(nq, [&](int64_t h, auto k) {
    Scores<decltype(k)::value, F>(q + h * q_stride, q_stride, rows, n, width, out + h * out_stride,
                                  out_stride);
  });
}

template <RowFormat F>
void WeightedSumsOf(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                    float* out, int64_t out_stride) {
  InGroupsOf4(nw, [&](int64_t h, auto k) {
    constexpr int kW = decltype(k)::value;  // one output: 8 vectors per pass, else 4
    WeightedSums<kW, kW == 1 ? 8 : 4, F>(w + h * w_stride, w_stride, rows, n, dim, out + h * out_stride,
                                         out_stride);
  });
}

}  // namespace

void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                     float* out, int64_t out_stride) {
  if (rows.format == RowFormat::kBf16) {
    ScoresOf<RowFormat::kBf16>(q, nq, q_stride, rows, n, width, out, out_stride);
  } else {
    ScoresOf<RowFormat::kFp8E4M3>(q, nq, q_stride, rows, n, width, out, out_stride);
  }
}

void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                           float* out, int64_t out_stride) {
  if (rows.format == RowFormat::kBf16) {
    WeightedSumsOf<RowFormat::kBf16>(w, nw, w_stride, rows, n, dim, out, out_stride);
  } else {
    WeightedSumsOf<RowFormat::kFp8E4M3>(w, nw, w_stride, rows, n, dim, out, out_stride);
  }
}

void Fp8RowsToBf16(RowsRef rows, int64_t n, int64_t width, uint16_t* out) {
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* r = static_cast<const uint8_t*>(rows.data) + j * rows.stride;
    for (int64_t d = 0; d < width; d += 16) {
      const __mmask16 m = Mask16(width - d);
      // value · 2^-8 in fp32, then · 2^8 (exact), whose upper half is the value's bf16 (exact:
      // an e4m3 value has 4 significant bits).
      const __m512 v = _mm512_mul_ps(Load16<RowFormat::kFp8E4M3>(r, d, m), _mm512_set1_ps(256.0f));
      const __m256i bf16 = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));
      _mm256_mask_storeu_epi16(out + j * width + d, m, bf16);
    }
  }
}

}  // namespace tandem::engine::kernels::cpu::avx512
