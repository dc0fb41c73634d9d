// AVX2 + FMA + F16C GEMV kernels (decode: m <= 16). Compiled with -mavx2 -mfma -mf16c -O3;
// matmul.cc calls them only after HostCpuFeatures() says the CPU has all three.
//
// Weights are streamed once: each 8-, 16- or 32-weight chunk is widened in registers and reused
// for every activation row (up to 4 at a time; larger batches run in slices of 4 over weight row
// blocks that stay in L2). INT4 runs integer dot products on the nibbles (vpmaddwd against int16
// activations, or vpmaddubsw against int8), the +8 offset removed afterwards.
#include <algorithm>
#include <chrono>
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

// The FP8 decodes (see Fp8x8ToFloat and Fp8x8ToFloatDirect below).
enum class Fp8Path { kHalf, kDirect };

// The block kernels with one FP8 decode or the other; GemvDriver (gemv_driver.h) walks the rows
// and batches. BlockKernels serves bf16, int4 and fp8 through fp16; DirectFp8Kernels only fp8.
struct BlockKernels : GemvDriver<BlockKernels> {
  // FP8 decodes more per byte than bf16, and with 4 weight rows in flight a Zen 4 core waited on
  // DRAM: 8 rows, A/B alternating over 3 rounds at 2 threads on 4096x14336, took the direct decode
  // from 3.22 to 2.87 ms and the fp16 one from 3.42 to 3.13 ms (AVX-512 went the other way).
  static constexpr int kFp8RowsForOneActivation = 8;
  template <int M, int R>
  static void Bf16Block(const PackedWeight& w, const float* x, float* y, int64_t n);
  template <int M, int R>
  static void Fp8Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
    Fp8BlockAs<Fp8Path::kHalf, M, R>(w, x, y, n);
  }
  template <int M, int R, bool kInt16>
  static void Int4Block(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0, float* y,
                        int64_t n);
  template <Fp8Path P, int M, int R>
  static void Fp8BlockAs(const PackedWeight& w, const float* x, float* y, int64_t n);
};

struct DirectFp8Kernels : GemvDriver<DirectFp8Kernels> {
  static constexpr int kFp8RowsForOneActivation = BlockKernels::kFp8RowsForOneActivation;
  template <int M, int R>
  static void Fp8Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
    BlockKernels::Fp8BlockAs<Fp8Path::kDirect, M, R>(w, x, y, n);
  }
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

// 8 e4m3 codes -> 8 fp32 holding value · 2^-120: each code sign-extended to a dword and shifted
// up 20 puts exponent and mantissa in fp32's fields and the sign in bit 31; the mask clears the
// sign's copies. Three instructions and no vcvtph2ps, which bounds the fp16 decode on AMD Zen
// (measured 1.6x the direct decode's time per weight from L2 on Zen 4). e4m3 subnormals (exponent
// 0) become fp32 subnormals, exactly: an FMA takes them at full speed on Zen, but on Intel cores
// each one costs a microcode assist, so this decode runs only where SubnormalFmaIsFast() measured
// no such penalty.
inline __m256 Fp8x8ToFloatDirect(const uint8_t* p) {
  const __m256i codes = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_slli_epi32(codes, 20), _mm256_set1_epi32(static_cast<int32_t>(0x87f00000u))));
}

// Block sums of (value · 2^-8) · (x · 2^40) back to value · x, and of (value · 2^-120) · (x · 2^90).
constexpr float kHalfDecodeUnscale = 256.0f * kFp8ActivationUnscale;                                  // 2^-32
constexpr float kDirectDecodeUnscale = 1329227995784915872903807060280344576.0f * kFp8DirectUnscale;  // 2^30

template <Fp8Path P, int M, int R>
void BlockKernels::Fp8BlockAs(const PackedWeight& w, const float* x, float* y, int64_t n) {
  constexpr float kUnscale = P == Fp8Path::kHalf ? kHalfDecodeUnscale : kDirectDecodeUnscale;
  constexpr float kActivationUnscale = P == Fp8Path::kHalf ? kFp8ActivationUnscale : kFp8DirectUnscale;
  // Accumulator chains per activation row (a step covers 32 weights). One activation row streams
  // 8 weight rows, 8 chains already (16 accumulators would not leave AVX2's 16 registers any room),
  // so it takes one chain per row; the leftover rows (R = 1) take one too, so that a row sums in
  // the same order whichever block it falls in: MatmulBatch splits rows differently from Matmul
  // and must give the same bits.
  constexpr int kC = M == 1 ? 1 : kChains<M>;
  static_assert(M > 1 || kFp8RowsForOneActivation >= 8, "one chain only where rows fill the FMA pipes");
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
          const __m256 q = P == Fp8Path::kHalf ? Fp8x8ToFloat(rows[r] + k + 8 * j)
                                               : Fp8x8ToFloatDirect(rows[r] + k + 8 * j);
          for (int i = 0; i < M; ++i) {
            acc[r][i][j % kC] =
                _mm256_fmadd_ps(q, _mm256_loadu_ps(x + i * k_total + k + 8 * j), acc[r][i][j % kC]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float block_scale = scales[r][kb / kFp8BlockSize];
      const __m256 s = _mm256_set1_ps(block_scale * kUnscale);
      for (int i = 0; i < M; ++i) {
        __m256 block = acc[r][i][0];
        for (int c = 1; c < kC; ++c) block = _mm256_add_ps(block, acc[r][i][c]);
        total[r][i] = _mm256_fmadd_ps(block, s, total[r][i]);
        for (int64_t kk = k; kk < k_end; ++kk) {
          tail[r][i] += Fp8E4M3ToFloat(rows[r][kk]) * block_scale * x[i * k_total + kk] * kActivationUnscale;
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

void QuantizeRowNatural(const float* x, int64_t cols, Int4Activation kind, void* q, float* scale,
                        float* corr) {
  // The portable loop's IEEE operations in its order (matmul.cc): |x| max, scale = amax / qmax,
  // inv = 1 / scale, q = round-half-even(x · inv) (vcvtps2dq in the default rounding mode, as
  // nearbyint) clamped, corr = 8 · Σq · scale. 32 values per group, four vectors.
  const bool int16 = kind == Int4Activation::kInt16;
  const float qmax = int16 ? 32767.0f : 127.0f;
  const __m256i hi = _mm256_set1_epi32(int16 ? 32767 : 127), lo = _mm256_set1_epi32(int16 ? -32767 : -127);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const int64_t groups = (cols + kInt4GroupSize - 1) / kInt4GroupSize;
  alignas(32) float tail[kInt4GroupSize];
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t k0 = g * kInt4GroupSize;
    const float* src = x + k0;
    if (cols - k0 < kInt4GroupSize) {  // the last, partial group: zeros past cols
      std::fill_n(tail, kInt4GroupSize, 0.0f);
      std::copy(x + k0, x + cols, tail);
      src = tail;
    }
    __m256 v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(src + 8 * j);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float s = amax > 0.0f ? amax / qmax : 1.0f;
    const __m256 inv = _mm256_set1_ps(1.0f / s);
    __m256i qi[4];
    for (int j = 0; j < 4; ++j)
      qi[j] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[j], inv)), lo), hi);
    // packs works within 128-bit lanes; the permute puts the elements back in order.
    const __m256i w01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[0], qi[1]), 0xd8);
    const __m256i w23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[2], qi[3]), 0xd8);
    if (int16) {
      int16_t* out = static_cast<int16_t*>(q) + k0;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), w01);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), w23);
    } else {
      const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi16(w01, w23), 0xd8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int8_t*>(q) + k0), b);
    }
    const __m256i sum8 = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    const int32_t sum = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1)));
    scale[g] = s;
    corr[g] = 8.0f * static_cast<float>(sum) * s;
  }
}

void GemvFp8Direct(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  DirectFp8Kernels::Fp8(w, x, m, y, n0, n1);
}

namespace {

// Seconds for 8 independent chains of `iters` FMAs each whose multiplicand is w.
__attribute__((noipa)) double TimeFmaChains(float w, int iters, float* sink) {
  const __m256 wv = _mm256_set1_ps(w), xv = _mm256_set1_ps(1.0e30f);
  __m256 a0 = _mm256_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(wv, xv, a0);
    a1 = _mm256_fmadd_ps(wv, xv, a1);
    a2 = _mm256_fmadd_ps(wv, xv, a2);
    a3 = _mm256_fmadd_ps(wv, xv, a3);
    a4 = _mm256_fmadd_ps(wv, xv, a4);
    a5 = _mm256_fmadd_ps(wv, xv, a5);
    a6 = _mm256_fmadd_ps(wv, xv, a6);
    a7 = _mm256_fmadd_ps(wv, xv, a7);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const __m256 all = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  *sink += HorizontalSum(all);
  return seconds;
}

}  // namespace

bool SubnormalFmaIsFast() {
  // FMAs with a subnormal multiplicand (2^-130, as the direct FP8 decode makes of e4m3 subnormals)
  // against the same with a normal one (2^-100), best of 7 each, interleaved: on Intel cores the
  // former take a microcode assist each (tens of times slower), on AMD Zen they run at full speed.
  // A 3x threshold leaves a shared machine's noise far on either side. ~0.1 ms, once.
  static const bool fast = [] {
    float sink = 0;
    double subnormal = 1e9, normal = 1e9;
    for (int round = 0; round < 7; ++round) {
      subnormal = std::min(subnormal, TimeFmaChains(7.346840e-40f, 2000, &sink));
      normal = std::min(normal, TimeFmaChains(7.888609e-31f, 2000, &sink));
    }
    return sink != 12345.0f && subnormal < 3.0 * normal;
  }();
  return fast;
}
}  // namespace tandem::engine::kernels::cpu::avx2
