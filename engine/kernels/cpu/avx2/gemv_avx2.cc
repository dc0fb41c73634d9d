// AVX2 + FMA + F16C GEMV kernels (decode: m <= 16). Compiled with -mavx2 -mfma -mf16c -O3;
// matmul.cc calls them only after HostCpuFeatures() says the CPU has all three.
//
// Weights are streamed once: each 8-, 16- or 32-weight chunk is widened in registers and reused
// for every activation row (up to 4 at a time; larger batches run in slices of 4 over weight row
// blocks that stay in L2). INT4 runs integer dot products on the nibbles (vpmaddwd against int16
// activations, or vpmaddubsw against int8), the +8 offset removed afterwards.
#include <algorithm>
#include <type_traits>

#include <immintrin.h>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/avx2/simd_avx2.h"
#include "engine/kernels/cpu/gemv_driver.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu::avx2 {
namespace {

// How far ahead of the current weight byte each GEMV stream prefetches (into L2: _MM_HINT_T1
// measured better than into L1), per format (measured on
// the 2-core EPYC these run on: the lighter the decode, the further ahead it pays to ask).
constexpr int64_t kPrefetchBf16Bytes = 8192;
constexpr int64_t kPrefetchFp8Bytes = 2048;
constexpr int64_t kPrefetchInt4Bytes = 12288;

// The AVX2 block kernels; GemvDriver (gemv_driver.h) walks the rows and batches.
struct BlockKernels : GemvDriver<BlockKernels> {
  template <int M, int R>
  static void Bf16Block(const PackedWeight& w, const float* x, float* y, int64_t n);
  template <int M, int R>
  static void Fp8Block(const PackedWeight& w, const float* x, float* y, int64_t n);
  template <int M, int R, bool kInt16>
  static void Int4Block(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0, float* y,
                        int64_t n);
};

// Weight rows [n, n + R) against activation rows [0, M).
template <int M, int R>
void BlockKernels::Bf16Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
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
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k) + kPrefetchBf16Bytes, _MM_HINT_T1);
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

// 8 e4m3 codes -> 8 fp32 holding value · 2^-8, through fp16: each code sign-extended to a word and
// shifted up 7 puts exponent/mantissa in fp16's fields (whose bias is 8 larger) and the sign in
// bit 15; the mask clears the sign copy in bit 14; vcvtph2ps (F16C) widens. e4m3 subnormals
// (exponent 0, one random code in 16) become fp16 subnormals, exactly, and fp32 normals. (The
// earlier decode straight to fp32 · 2^-120 by a shuffle and shift turned them into fp32
// subnormals, and on Intel cores every FMA with a subnormal input takes a microcode assist: ~25x
// slower on random codes; vcvtph2ps takes fp16 subnormals at full speed, as the AVX-512 kernel
// found.) NaN codes are not weights.
inline __m256 Fp8x8ToFloat(const uint8_t* p) {
  const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i half = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(codes), 7),
                                     _mm_set1_epi16(static_cast<int16_t>(0xbfff)));
  return _mm256_cvtph_ps(half);
}

// Block sums of (value · 2^-8) · (x · 2^40) back to value · x.
constexpr float kHalfDecodeUnscale = 256.0f * kFp8ActivationUnscale;  // 2^-32

template <int M, int R>
void BlockKernels::Fp8Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
  constexpr int kC = kChains<M>;  // accumulator chains per activation row; a step covers 32 weights
  static_assert(kFp8BlockSize % 32 == 0, "a step never straddles a scale block");
  const int64_t k_total = w.cols(), n_total = w.rows(), scale_cols = Fp8ScaleCols(k_total);
  const uint8_t* rows[R];
  const float* scales[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = w.fp8() + (n + r) * k_total;
    scales[r] = w.scale() + ((n + r) / kFp8BlockSize) * scale_cols;
  }
  const int64_t ahead = PrefetchDistance(k_total, R, kPrefetchFp8Bytes);
  __m256 total[R][M];
  float tail[R][M] = {};
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) total[r][i] = _mm256_setzero_ps();
  }
  for (int64_t kb = 0; kb < k_total; kb += kFp8BlockSize) {
    const int64_t k_end = std::min(k_total, kb + kFp8BlockSize);
    __m256 acc[R][M][kC];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kb) + ahead, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kb) + ahead + 64, _MM_HINT_T1);
      for (int i = 0; i < M; ++i) {
        for (int c = 0; c < kC; ++c) acc[r][i][c] = _mm256_setzero_ps();
      }
    }
    int64_t k = kb;
    for (; k + 32 <= k_end; k += 32) {
      for (int r = 0; r < R; ++r) {
        for (int j = 0; j < 4; ++j) {
          const __m256 q = Fp8x8ToFloat(rows[r] + k + 8 * j);
          for (int i = 0; i < M; ++i) {
            acc[r][i][j % kC] =
                _mm256_fmadd_ps(q, _mm256_loadu_ps(x + i * k_total + k + 8 * j), acc[r][i][j % kC]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float block_scale = scales[r][kb / kFp8BlockSize];
      const __m256 s = _mm256_set1_ps(block_scale * kHalfDecodeUnscale);
      for (int i = 0; i < M; ++i) {
        __m256 block = acc[r][i][0];
        for (int c = 1; c < kC; ++c) block = _mm256_add_ps(block, acc[r][i][c]);
        total[r][i] = _mm256_fmadd_ps(block, s, total[r][i]);
        for (int64_t kk = k; kk < k_end; ++kk) {
          tail[r][i] +=
              Fp8E4M3ToFloat(rows[r][kk]) * block_scale * x[i * k_total + kk] * kFp8ActivationUnscale;
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) y[i * n_total + n + r] = HorizontalSum(total[r][i]) + tail[r][i];
  }
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
void BlockKernels::Int4Block(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0, float* y,
                             int64_t n) {
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
      _mm_prefetch(reinterpret_cast<const char*>(row + g * 16 + kPrefetchInt4Bytes), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(row + g * 16 + kPrefetchInt4Bytes + 64), _MM_HINT_T1);
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

}  // namespace

void GemvBf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  BlockKernels::Bf16(w, x, m, y, n0, n1);
}

void GemvFp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  BlockKernels::Fp8(w, x, m, y, n0, n1);
}

void GemvInt4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1) {
  BlockKernels::Int4(w, xq, y, n0, n1);
}
}  // namespace tandem::engine::kernels::cpu::avx2
