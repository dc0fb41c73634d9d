// AVX2 + FMA + F16C kernels. This file alone is compiled with -mavx2 -mfma -mf16c; matmul.cc
// calls it only after HostCpuFeatures() says the CPU has all three.
//
// GEMV (m <= 4): weights are streamed once; each 16- or 32-weight chunk is widened in registers
// and reused for every activation row. INT4 runs integer dot products on the nibbles
// (vpmaddwd against int16 activations, or vpmaddubsw against int8), the +8 offset removed after.
// GEMM: a 16-row panel of W is dequantized to fp32 [kc, 16] (L1-resident) and a 6x16 register
// tile of y accumulates with broadcast-FMA.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include <immintrin.h>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu::avx2 {
namespace {

// How far ahead of the current weight byte each GEMV stream prefetches, per format (measured on
// the 2-core EPYC these run on: the lighter the decode, the further ahead it pays to ask).
constexpr int64_t kPrefetchBf16Bytes = 8192;
constexpr int64_t kPrefetchFp8Bytes = 2048;
constexpr int64_t kPrefetchInt4Bytes = 12288;

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 bf16 -> 8 fp32.
inline __m256 LoadBf16x8(const uint16_t* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Independent accumulators per activation row: FMA latency is 4 cycles and two issue per cycle,
// so a single activation row needs 8 chains in flight; with 3-4 rows, 2 each suffice.
template <int M>
constexpr int kChains = M == 2 ? 4 : 2;

// A single activation row is memory-bound: weight rows are then streamed R = 4 at a time, which
// gives each thread four independent DRAM streams (one sequential stream per thread reaches
// clearly less of the read bandwidth than several streams do).
template <int M>
constexpr int kRowsAtOnce = M == 1 ? 4 : 1;

// Weight rows [n, n + R) against activation rows [0, M).
template <int M, int R>
void GemvBf16Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
  constexpr int kC = kChains<M>;
  const int64_t k_total = w.cols(), n_total = w.rows();
  const uint16_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w.bf16() + (n + r) * k_total;
  __m256 acc[R][M][kC];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      for (int c = 0; c < kC; ++c) acc[r][i][c] = _mm256_setzero_ps();
    }
  }
  int64_t k = 0;
  for (; k + 8 * kC <= k_total; k += 8 * kC) {
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k) + kPrefetchBf16Bytes, _MM_HINT_T0);
      for (int c = 0; c < kC; ++c) {
        const __m256 wv = LoadBf16x8(rows[r] + k + 8 * c);
        for (int i = 0; i < M; ++i) {
          acc[r][i][c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * k_total + k + 8 * c), acc[r][i][c]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      __m256 total = acc[r][i][0];
      for (int c = 1; c < kC; ++c) total = _mm256_add_ps(total, acc[r][i][c]);
      float sum = HorizontalSum(total);
      for (int64_t kk = k; kk < k_total; ++kk) sum += Bf16ToFloat(rows[r][kk]) * x[i * k_total + kk];
      y[i * n_total + n + r] = sum;
    }
  }
}

template <int M>
void GemvBf16Rows(const PackedWeight& w, const float* x, float* y, int64_t n0, int64_t n1) {
  constexpr int R = kRowsAtOnce<M>;
  int64_t n = n0;
  for (; n + R <= n1; n += R) GemvBf16Block<M, R>(w, x, y, n);
  for (; n < n1; ++n) GemvBf16Block<M, 1>(w, x, y, n);
}

// Words holding an e4m3 code in their high byte -> fp16 of (value · 2^-8): the sign stays in bit
// 15, exponent and mantissa move into fp16's fields (whose exponent bias is 8 larger).
inline __m256i HalfFromCodeHigh(__m256i code_high) {
  return _mm256_and_si256(_mm256_srai_epi16(code_high, 1), _mm256_set1_epi16(static_cast<int16_t>(0xbfff)));
}

template <int M, int R>
void GemvFp8Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
  constexpr int kC = kChains<M>;  // accumulator chains per activation row; a step covers 32 weights
  static_assert(kFp8BlockSize % 32 == 0, "a step never straddles a scale block");
  const int64_t k_total = w.cols(), n_total = w.rows(), scale_cols = Fp8ScaleCols(k_total);
  const uint8_t* rows[R];
  const float* scales[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = w.fp8() + (n + r) * k_total;
    scales[r] = w.scale() + ((n + r) / kFp8BlockSize) * scale_cols;
  }
  __m256 total[R][M];
  float tail[R][M] = {};
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) total[r][i] = _mm256_setzero_ps();
  }
  for (int64_t kb = 0; kb < k_total; kb += kFp8BlockSize) {
    const int64_t k_end = std::min(k_total, kb + kFp8BlockSize);
    __m256 acc[R][M][kC];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kb) + kPrefetchFp8Bytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kb) + kPrefetchFp8Bytes + 64, _MM_HINT_T0);
      for (int i = 0; i < M; ++i) {
        for (int c = 0; c < kC; ++c) acc[r][i][c] = _mm256_setzero_ps();
      }
    }
    int64_t k = kb;
    for (; k + 32 <= k_end; k += 32) {
      for (int r = 0; r < R; ++r) {
        // Unpacking bytes against zero yields words holding code << 8 (no shift needed); the
        // in-lane unpack order is [0..7 | 16..23] and [8..15 | 24..31].
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + k));
        const __m256i lo = HalfFromCodeHigh(_mm256_unpacklo_epi8(_mm256_setzero_si256(), v));
        const __m256i hi = HalfFromCodeHigh(_mm256_unpackhi_epi8(_mm256_setzero_si256(), v));
        const __m256 q[4] = {_mm256_cvtph_ps(_mm256_castsi256_si128(lo)),
                             _mm256_cvtph_ps(_mm256_castsi256_si128(hi)),
                             _mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1)),
                             _mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1))};
        for (int j = 0; j < 4; ++j) {
          for (int i = 0; i < M; ++i) {
            acc[r][i][j % kC] =
                _mm256_fmadd_ps(q[j], _mm256_loadu_ps(x + i * k_total + k + 8 * j), acc[r][i][j % kC]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float block_scale = scales[r][kb / kFp8BlockSize];
      const __m256 s = _mm256_set1_ps(block_scale * 256.0f);
      for (int i = 0; i < M; ++i) {
        __m256 block = acc[r][i][0];
        for (int c = 1; c < kC; ++c) block = _mm256_add_ps(block, acc[r][i][c]);
        total[r][i] = _mm256_fmadd_ps(block, s, total[r][i]);
        for (int64_t kk = k; kk < k_end; ++kk) {
          tail[r][i] += Fp8E4M3ToFloat(rows[r][kk]) * block_scale * x[i * k_total + kk];
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) y[i * n_total + n + r] = HorizontalSum(total[r][i]) + tail[r][i];
  }
}

template <int M>
void GemvFp8Rows(const PackedWeight& w, const float* x, float* y, int64_t n0, int64_t n1) {
  constexpr int R = kRowsAtOnce<M>;
  int64_t n = n0;
  for (; n + R <= n1; n += R) GemvFp8Block<M, R>(w, x, y, n);
  for (; n < n1; ++n) GemvFp8Block<M, 1>(w, x, y, n);
}

// ---- INT4 GEMV ----------------------------------------------------------------------------------
// Per group g of 32 weights the integer dot d[g] = Σ u·q (u = nibble, unsigned) is formed in 8
// int32 lanes; eight groups' lane vectors are then reduced together into one vector of eight d[g],
// so all float work happens once per 8 groups:
//   y += Σ_g ws[g] · (xs[g] · d[g] − corr[g]),  corr[g] = 8 · xs[g] · Σ q  (the +8 nibble offset).

// 8 int32 lanes of one group's partial dot with int16 activations q[0..32).
inline __m256i DotI16(const uint8_t* bytes, const int16_t* q) {
  // Word i holds byte i = element i (low nibble) | element i+16 (high nibble) << 4.
  const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi16(0x0f));
  const __m256i hi = _mm256_srli_epi16(w, 4);
  return _mm256_add_epi32(
      _mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))),
      _mm256_madd_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16))));
}

// The same with int8 activations: one vpmaddubsw over all 32 (unsigned nibble, signed int8) pairs.
inline __m256i DotI8(const uint8_t* bytes, const int8_t* q) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  // [elements 0..15 | elements 16..31] as unsigned bytes.
  const __m256i u = _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                     _mm256_set1_epi8(0x0f));
  const __m256i p16 = _mm256_maddubs_epi16(u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Lane j of the result = the sum of the 8 lanes of p[j].
inline __m256i ReduceEight(const __m256i* p) {
  const __m256i a0 = _mm256_hadd_epi32(p[0], p[1]), a1 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i a2 = _mm256_hadd_epi32(p[4], p[5]), a3 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i b0 = _mm256_hadd_epi32(a0, a1), b1 = _mm256_hadd_epi32(a2, a3);
  // b0 = [p0..p3 low-lane sums | p0..p3 high-lane sums], b1 likewise for p4..p7.
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

// Weight rows [n, n + R) against activation rows [i0, i0 + M) of xq. The R rows advance together,
// 8 groups (128 bytes) at a time, as R independent DRAM streams.
template <int M, int R, bool kInt16>
void GemvInt4Block(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0, float* y, int64_t n) {
  const int64_t groups = w.groups(), n_total = w.rows();
  const int64_t full = groups / 8 * 8;
  const uint8_t* rows[R];
  const uint16_t* scales[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = w.int4() + (n + r) * groups * 16;
    scales[r] = w.int4_scale() + (n + r) * groups;
  }
  __m256 acc[R][M];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) acc[r][i] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < full; g += 8) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = rows[r];
      _mm_prefetch(reinterpret_cast<const char*>(row + g * 16 + kPrefetchInt4Bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(row + g * 16 + kPrefetchInt4Bytes + 64), _MM_HINT_T0);
      __m256i p[M][8];
      for (int j = 0; j < 8; ++j) {
        const uint8_t* bytes = row + (g + j) * 16;
        for (int i = 0; i < M; ++i) {
          const int64_t at = ((i0 + i) * groups + g + j) * 32;
          if constexpr (kInt16) {
            p[i][j] = DotI16(bytes, xq.q16.data() + at);
          } else {
            p[i][j] = DotI8(bytes, xq.q8.data() + at);
          }
        }
      }
      const __m256 wscale = LoadBf16x8(scales[r] + g);
      for (int i = 0; i < M; ++i) {
        const float* xs = xq.scale.data() + (i0 + i) * groups + g;
        const float* corr = xq.corr.data() + (i0 + i) * groups + g;
        const __m256 t = _mm256_fmsub_ps(_mm256_cvtepi32_ps(ReduceEight(p[i])), _mm256_loadu_ps(xs),
                                         _mm256_loadu_ps(corr));
        acc[r][i] = _mm256_fmadd_ps(wscale, t, acc[r][i]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      float sum = HorizontalSum(acc[r][i]);
      for (int64_t g = full; g < groups; ++g) {
        const int64_t at = ((i0 + i) * groups + g) * 32;
        const __m256i p = kInt16 ? DotI16(rows[r] + g * 16, xq.q16.data() + at)
                                 : DotI8(rows[r] + g * 16, xq.q8.data() + at);
        const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
        const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        const int32_t d = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
        const size_t sg = static_cast<size_t>((i0 + i) * groups + g);
        sum += Bf16ToFloat(scales[r][g]) * (xq.scale[sg] * static_cast<float>(d) - xq.corr[sg]);
      }
      y[(i0 + i) * n_total + n + r] = sum;
    }
  }
}

template <int M, bool kInt16>
void GemvInt4Rows(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0, float* y, int64_t n0,
                  int64_t n1) {
  constexpr int R = M == 1 ? 2 : 1;  // measured: a third and fourth int4 stream per thread slow it down
  int64_t n = n0;
  for (; n + R <= n1; n += R) GemvInt4Block<M, R, kInt16>(w, xq, i0, y, n);
  for (; n < n1; ++n) GemvInt4Block<M, 1, kInt16>(w, xq, i0, y, n);
}

// ---- GEMM ------------------------------------------------------------------------------------
constexpr int64_t kPanelRows = 16;      // N per panel: two ymm of fp32
constexpr int64_t kPanelK = 256;        // K per panel: 16 KiB of fp32, L1-resident
constexpr int kTileM = 6;               // activation rows per register tile (12 accumulators)
constexpr int64_t kPanelsPerBlock = 4;  // 64 weight rows dequantized per K step (64 KiB, L2)

// One row's weights [k0, k0 + kc) decoded to fp32 with SIMD. REQUIRES: k0 a multiple of 128.
void DecodeRowChunk(const PackedWeight& w, int64_t n, int64_t k0, int64_t kc, float* out) {
  const int64_t k_total = w.cols();
  int64_t k = 0;
  switch (w.format()) {
    case WeightFormat::kBf16: {
      const uint16_t* row = w.bf16() + n * k_total + k0;
      for (; k + 8 <= kc; k += 8) _mm256_storeu_ps(out + k, LoadBf16x8(row + k));
      for (; k < kc; ++k) out[k] = Bf16ToFloat(row[k]);
      break;
    }
    case WeightFormat::kFp8Block128: {
      const uint8_t* row = w.fp8() + n * k_total + k0;
      const float* scale = w.scale() + (n / kFp8BlockSize) * Fp8ScaleCols(k_total) + k0 / kFp8BlockSize;
      for (; k + 16 <= kc; k += 16) {
        const __m256i words = _mm256_slli_epi16(
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k))), 8);
        const __m256i h = HalfFromCodeHigh(words);
        const __m256 s = _mm256_set1_ps(scale[k / kFp8BlockSize] * 256.0f);
        _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s));
        _mm256_storeu_ps(out + k + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s));
      }
      for (; k < kc; ++k) out[k] = Fp8E4M3ToFloat(row[k]) * scale[k / kFp8BlockSize];
      break;
    }
    case WeightFormat::kInt4Group32: {
      const int64_t groups = w.groups();
      const uint8_t* row = w.int4() + n * groups * 16;
      const uint16_t* scale = w.int4_scale() + n * groups;
      // Groups are whole (kc is a multiple of 32 except at the end of K, where the packing pads).
      for (; k < kc; k += 32) {
        const int64_t g = (k0 + k) / 32;
        const __m256 s = _mm256_set1_ps(Bf16ToFloat(scale[g]));
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16));
        const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0f));
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
        alignas(32) float tmp[32];
        const __m256i eight = _mm256_set1_epi32(8);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int q = 0; q < 4; ++q) {
          const __m256i ints = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[q]), eight);
          _mm256_store_ps(tmp + 8 * q, _mm256_mul_ps(_mm256_cvtepi32_ps(ints), s));
        }
        std::memcpy(out + k, tmp, sizeof(float) * static_cast<size_t>(std::min<int64_t>(32, kc - k)));
      }
      break;
    }
  }
}

// panel[k][j] = W[n0 + j][k0 + k] as fp32 for j < rows (zero beyond).
void DequantizePanel(const PackedWeight& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, float* panel) {
  if (rows < kPanelRows) std::memset(panel, 0, sizeof(float) * kPanelRows * kc);
  alignas(32) float row[kPanelK];
  for (int64_t j = 0; j < rows; ++j) {
    DecodeRowChunk(w, n0 + j, k0, kc, row);
    for (int64_t k = 0; k < kc; ++k) panel[k * kPanelRows + j] = row[k];
  }
}

// c[r][0..16) (+)= Σ_k a[k][r] * panel[k][0..16) for r < MR. a: packed activations [kc, 6].
template <int MR>
void MicroKernel(const float* a, const float* panel, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  __m256 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = accumulate ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    acc[r][1] = accumulate ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(panel + k * kPanelRows);
    const __m256 b1 = _mm256_load_ps(panel + k * kPanelRows + 8);
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + k * kTileM + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

void RunTile(int mr, const float* a, const float* panel, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  switch (mr) {
    case 1: MicroKernel<1>(a, panel, kc, c, ldc, accumulate); break;
    case 2: MicroKernel<2>(a, panel, kc, c, ldc, accumulate); break;
    case 3: MicroKernel<3>(a, panel, kc, c, ldc, accumulate); break;
    case 4: MicroKernel<4>(a, panel, kc, c, ldc, accumulate); break;
    case 5: MicroKernel<5>(a, panel, kc, c, ldc, accumulate); break;
    default: MicroKernel<6>(a, panel, kc, c, ldc, accumulate); break;
  }
}

}  // namespace

// Batches above 4 run in slices of 4 activation rows over blocks of kGemvRowBlock weight rows, so
// each block is read from DRAM once and re-read from L2 by the other slices.
constexpr int64_t kGemvRowBlock = 16;

template <typename Slice>
void ForEachSlice(int64_t m, int64_t n0, int64_t n1, const Slice& slice) {
  if (m <= 4) {
    slice(0, m, n0, n1);
    return;
  }
  for (int64_t nb = n0; nb < n1; nb += kGemvRowBlock) {
    const int64_t ne = std::min(n1, nb + kGemvRowBlock);
    for (int64_t i0 = 0; i0 < m; i0 += 4) slice(i0, std::min<int64_t>(4, m - i0), nb, ne);
  }
}

// Calls fn(std::integral_constant<int, M>{}) for M = rows in 1..4: the kernels are templates on M
// so their accumulators live in registers.
template <typename Fn>
void WithRows(int64_t rows, const Fn& fn) {
  switch (rows) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    default: fn(std::integral_constant<int, 4>{}); break;
  }
}

void GemvBf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  ForEachSlice(m, n0, n1, [&](int64_t i0, int64_t rows, int64_t b, int64_t e) {
    WithRows(rows, [&](auto kM) { GemvBf16Rows<kM>(w, x + i0 * w.cols(), y + i0 * w.rows(), b, e); });
  });
}

void GemvFp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  ForEachSlice(m, n0, n1, [&](int64_t i0, int64_t rows, int64_t b, int64_t e) {
    WithRows(rows, [&](auto kM) { GemvFp8Rows<kM>(w, x + i0 * w.cols(), y + i0 * w.rows(), b, e); });
  });
}

void GemvInt4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1) {
  ForEachSlice(xq.m, n0, n1, [&](int64_t i0, int64_t rows, int64_t b, int64_t e) {
    WithRows(rows, [&](auto kM) {
      if (xq.kind == Int4Activation::kInt16) {
        GemvInt4Rows<kM, true>(w, xq, i0, y, b, e);
      } else {
        GemvInt4Rows<kM, false>(w, xq, i0, y, b, e);
      }
    });
  });
}

void PackActivations(const float* x, int64_t m, int64_t k_total, float* packed) {
  for (int64_t t = 0; t < m; t += kTileM) {
    float* tile = packed + t * k_total;
    for (int64_t k = 0; k < k_total; ++k) {
      for (int64_t r = 0; r < kTileM; ++r) tile[k * kTileM + r] = t + r < m ? x[(t + r) * k_total + k] : 0.0f;
    }
  }
}

void GemmRows(const PackedWeight& w, const float* packed_x, int64_t m, float* y, int64_t n0, int64_t n1) {
  const int64_t k_total = w.cols(), n_total = w.rows();
  // kPanelsPerBlock panels of 16 rows share each activation tile while it sits in L1.
  alignas(32) static thread_local float panels[kPanelsPerBlock][kPanelRows * kPanelK];
  alignas(32) float edge[kTileM * kPanelRows];
  for (int64_t nb = n0; nb < n1; nb += kPanelRows * kPanelsPerBlock) {
    const int64_t block_rows = std::min(kPanelRows * kPanelsPerBlock, n1 - nb);
    const int64_t num_panels = (block_rows + kPanelRows - 1) / kPanelRows;
    for (int64_t k0 = 0; k0 < k_total; k0 += kPanelK) {
      const int64_t kc = std::min(kPanelK, k_total - k0);
      for (int64_t p = 0; p < num_panels; ++p) {
        DequantizePanel(w, nb + p * kPanelRows, std::min(kPanelRows, block_rows - p * kPanelRows), k0, kc,
                        panels[p]);
      }
      for (int64_t i = 0; i < m; i += kTileM) {
        const int mr = static_cast<int>(std::min<int64_t>(kTileM, m - i));
        const float* a = packed_x + i * k_total + k0 * kTileM;
        for (int64_t p = 0; p < num_panels; ++p) {
          const int64_t rows = std::min(kPanelRows, block_rows - p * kPanelRows);
          float* c = y + i * n_total + nb + p * kPanelRows;
          if (rows == kPanelRows) {
            RunTile(mr, a, panels[p], kc, c, n_total, k0 > 0);
            continue;
          }
          // A partial panel at the end of N: accumulate in a local tile, copy the valid columns.
          for (int r = 0; r < mr; ++r) {
            for (int64_t j = 0; j < kPanelRows; ++j) {
              edge[r * kPanelRows + j] = (k0 > 0 && j < rows) ? c[r * n_total + j] : 0.0f;
            }
          }
          RunTile(mr, a, panels[p], kc, edge, kPanelRows, true);
          for (int r = 0; r < mr; ++r)
            std::memcpy(c + r * n_total, edge + r * kPanelRows, sizeof(float) * rows);
        }
      }
    }
  }
}

}  // namespace tandem::engine::kernels::cpu::avx2
