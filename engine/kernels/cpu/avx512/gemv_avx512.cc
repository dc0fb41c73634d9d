// AVX-512 (F/BW/VL/DQ/VNNI) GEMV kernels (decode: m <= 16). Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni -mfma -O3; matmul.cc calls them only after HostCpuFeatures()
// says the CPU has them (HasAvx512Kernels).
//
// Same scheme as the AVX2 kernels (avx2/gemv_avx2.cc), over the same driver (gemv_driver.h):
// weights streamed once, several weight rows in flight per thread at batch 1, batches above 4 in
// slices of 4. Each step decodes 16 weights (bf16, fp8) or 64 (int4) per instruction sequence
// instead of 8 or 32. K tails use masked loads (masked-off weights and activations read as zero),
// so there is no scalar tail.
//
// Shared inline helpers that may not be inlined (float_codecs.h and the like) are not called here:
// the linker could keep this file's AVX-512 copy of one for callers on CPUs without AVX-512.
#include <cstdint>

#include "engine/kernels/cpu/avx512/simd_avx512.h"
#include "engine/kernels/cpu/gemv_driver.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu::avx512 {
namespace {

// Prefetch distance ahead of the current weight byte of each stream, into L2 (as avx2).
constexpr int64_t kPrefetchBf16Bytes = 8192;
constexpr int64_t kPrefetchFp8Bytes = 2048;
constexpr int64_t kPrefetchInt4Bytes = 8192;

// The FP8 decodes (Fp8x32ToFloat and Fp8x32ToFloatDirect below).
enum class Fp8Path { kHalf, kDirect };

// The AVX-512 block kernels; GemvDriver (gemv_driver.h) walks the rows and batches. BlockKernels
// serves bf16, int4 and fp8 through fp16; DirectFp8Kernels fp8 through the direct decode.
struct BlockKernels : GemvDriver<BlockKernels> {
  // FP8 weight rows in flight at batch 1: 4 (8 measured slower here, both decodes: 2.24 -> 2.59 ms
  // direct, 2.48 -> 2.97 ms fp16, 3 alternating rounds, 2 threads, 4096x14336, Zen 4).
  static constexpr int kFp8RowsForOneActivation = 4;
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

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- BF16 ---------------------------------------------------------------------------------------

// 16 bf16 -> 16 fp32 (bf16 is the top half of fp32).
__m512 Bf16x16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Weight rows [n, n + R) against activation rows [0, M).
template <int M, int R>
void BlockKernels::Bf16Block(const PackedWeight& w, const float* x, float* y, int64_t n) {
  constexpr int kC = kChains<M>;
  const int64_t k_total = w.cols(), n_total = w.rows();
  const uint16_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w.bf16() + (n + r) * k_total;
  const int64_t ahead = PrefetchDistance(2 * k_total, R, kPrefetchBf16Bytes);
  __m512 acc[R][M][kC];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      for (int c = 0; c < kC; ++c) acc[r][i][c] = _mm512_setzero_ps();
    }
  }
  int64_t k = 0;
  for (; k + 16 * kC <= k_total; k += 16 * kC) {
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k) + ahead, _MM_HINT_T1);
      for (int c = 0; c < kC; ++c) {
        const __m512 wv = Bf16x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + k + 16 * c)));
        for (int i = 0; i < M; ++i) {
          acc[r][i][c] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + i * k_total + k + 16 * c), acc[r][i][c]);
        }
      }
    }
  }
  for (; k < k_total; k += 16) {
    const __mmask16 mask = Mask16(k_total - k);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = Bf16x16(_mm256_maskz_loadu_epi16(mask, rows[r] + k));
      for (int i = 0; i < M; ++i) {
        acc[r][i][0] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mask, x + i * k_total + k), acc[r][i][0]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      __m512 total = acc[r][i][0];
      for (int c = 1; c < kC; ++c) total = _mm512_add_ps(total, acc[r][i][c]);
      y[i * n_total + n + r] = _mm512_reduce_add_ps(total);
    }
  }
}

// ---- FP8 ----------------------------------------------------------------------------------------

// 16 e4m3 codes -> 16 fp32 holding value · 2^-8, through fp16: each code sign-extended to a word
// and shifted up 7 puts exponent/mantissa in fp16's fields (whose bias is 8 larger) and the sign in
// bit 15; the mask clears the sign copy in bit 14; vcvtph2ps widens. e4m3 subnormals become fp16
// subnormals, exactly, and fp32 normals. (AVX2's shift trick straight to fp32 · 2^-120 costs one
// instruction less but turns e4m3 subnormals into fp32 subnormals, and on Intel cores every FMA
// with a subnormal input takes a microcode assist: measured 30x slower on random codes, where one
// code in 16 is subnormal, on this Xeon; vcvtph2ps takes fp16 subnormals at full speed.) NaN codes
// are not weights.
__m512 Fp8x16ToFloat(__m128i codes) {
  const __m256i half = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7),
                                        _mm256_set1_epi16(static_cast<int16_t>(0xbfff)));
  return _mm512_cvtph_ps(half);
}

// The same for 32 codes at once (out[0]: codes 0..15, out[1]: 16..31): one sign-extend, shift
// and mask over 512 bits instead of two over 256 saves two of the ~12 vector uops per 32 codes,
// and this loop is bound by them (512-bit uops issue on two ports only).
void Fp8x32ToFloat(const uint8_t* p, __m512* out) {
  const __m512i half = _mm512_and_si512(
      _mm512_slli_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 7),
      _mm512_set1_epi16(static_cast<int16_t>(0xbfff)));
  out[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(half));
  out[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1));
}

// 16 e4m3 codes -> 16 fp32 holding value · 2^-120, as avx2's Fp8x8ToFloatDirect (sign-extend to
// dwords, shift up 20, mask): no vcvtph2ps; e4m3 subnormals become fp32 subnormals, so only where
// avx2::SubnormalFmaIsFast().
__m512 Fp8x16ToFloatDirect(__m128i codes) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(_mm512_cvtepi8_epi32(codes), 20),
                                              _mm512_set1_epi32(static_cast<int32_t>(0x87f00000u))));
}

// 32 codes through either decode (out[0]: codes 0..15, out[1]: 16..31).
template <Fp8Path P>
void Fp8x32As(const uint8_t* p, __m512* out) {
  if constexpr (P == Fp8Path::kHalf) {
    Fp8x32ToFloat(p, out);
  } else {
    out[0] = Fp8x16ToFloatDirect(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    out[1] = Fp8x16ToFloatDirect(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  }
}

// Block sums of (value · 2^-8) · (x · 2^40) back to value · x, and of (value · 2^-120) · (x · 2^90).
constexpr float kHalfDecodeUnscale = 256.0f * avx2::kFp8ActivationUnscale;  // 2^-32
constexpr float kDirectDecodeUnscale = 1329227995784915872903807060280344576.0f * avx2::kFp8DirectUnscale;

template <Fp8Path P, int M, int R>
void BlockKernels::Fp8BlockAs(const PackedWeight& w, const float* x, float* y, int64_t n) {
  constexpr float kUnscale = P == Fp8Path::kHalf ? kHalfDecodeUnscale : kDirectDecodeUnscale;
  constexpr int kC = kChains<M>;  // accumulator chains per activation row; a step covers 64 weights
  static_assert(kFp8BlockSize % 64 == 0, "a step never straddles a scale block");
  const int64_t k_total = w.cols(), n_total = w.rows(), scale_cols = Fp8ScaleCols(k_total);
  const uint8_t* rows[R];
  const float* scales[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = w.fp8() + (n + r) * k_total;
    scales[r] = w.scale() + ((n + r) / kFp8BlockSize) * scale_cols;
  }
  const int64_t ahead = PrefetchDistance(k_total, R, kPrefetchFp8Bytes);
  __m512 total[R][M];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) total[r][i] = _mm512_setzero_ps();
  }
  for (int64_t kb = 0; kb < k_total; kb += kFp8BlockSize) {
    const int64_t k_end = k_total < kb + kFp8BlockSize ? k_total : kb + kFp8BlockSize;
    __m512 acc[R][M][kC];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kb) + ahead, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kb) + ahead + 64, _MM_HINT_T1);
      for (int i = 0; i < M; ++i) {
        for (int c = 0; c < kC; ++c) acc[r][i][c] = _mm512_setzero_ps();
      }
    }
    int64_t k = kb;
    for (; k + 64 <= k_end; k += 64) {
      for (int r = 0; r < R; ++r) {
        __m512 qs[4];
        Fp8x32As<P>(rows[r] + k, qs);
        Fp8x32As<P>(rows[r] + k + 32, qs + 2);
        for (int j = 0; j < 4; ++j) {
          const __m512 q = qs[j];
          for (int i = 0; i < M; ++i) {
            acc[r][i][j % kC] =
                _mm512_fmadd_ps(q, _mm512_loadu_ps(x + i * k_total + k + 16 * j), acc[r][i][j % kC]);
          }
        }
      }
    }
    for (; k < k_end; k += 16) {
      const __mmask16 mask = Mask16(k_end - k);
      for (int r = 0; r < R; ++r) {
        const __m128i codes = _mm_maskz_loadu_epi8(mask, rows[r] + k);
        const __m512 q = P == Fp8Path::kHalf ? Fp8x16ToFloat(codes) : Fp8x16ToFloatDirect(codes);
        for (int i = 0; i < M; ++i) {
          acc[r][i][0] = _mm512_fmadd_ps(q, _mm512_maskz_loadu_ps(mask, x + i * k_total + k), acc[r][i][0]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(scales[r][kb / kFp8BlockSize] * kUnscale);
      for (int i = 0; i < M; ++i) {
        __m512 block = acc[r][i][0];
        for (int c = 1; c < kC; ++c) block = _mm512_add_ps(block, acc[r][i][c]);
        total[r][i] = _mm512_fmadd_ps(block, s, total[r][i]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) y[i * n_total + n + r] = _mm512_reduce_add_ps(total[r][i]);
  }
}

// ---- INT4 ---------------------------------------------------------------------------------------
// A pair of groups (32 weight bytes: 64 nibbles) is one 512-bit step against activations in
// ActivationOrder::kPairs. Integer dots run per pair in 16 int32 lanes; four pairs' lane vectors
// are reduced together into the eight group dots d[g], so float work happens once per 8 groups:
//   y += Σ_g ws[g] · (xs[g] · d[g] − corr[g]),  corr[g] = 8 · xs[g] · Σ q  (the +8 nibble offset).
// The last, partial block of 8 groups runs the same code with masked weight and scale loads
// (masked-off nibbles read as 0, so they add nothing; the activations are zero-padded).

// Which dword lanes of a pair's dot belong to its first group: with int16 activations lanes 0..7
// (the low nibbles then the high nibbles of word lanes 0..15), with int8 lanes 0..3 and 8..11.
// The selectors pick, from two pairs' vectors, [first-group half A, second-group half A, ...] and
// the complementary halves, so that their sum holds one group per 128-bit lane.
template <bool kInt16>
constexpr int kSelectA = kInt16 ? 0x88 : 0x44;
template <bool kInt16>
constexpr int kSelectB = kInt16 ? 0xdd : 0xee;

// Lane g of the result (g in 0..7) = the group dot of group g, from the pair vectors p[0..3].
template <bool kInt16>
__m256i ReduceFourPairs(const __m512i* p) {
  const __m512i r0 = _mm512_add_epi32(_mm512_shuffle_i32x4(p[0], p[1], kSelectA<kInt16>),
                                      _mm512_shuffle_i32x4(p[0], p[1], kSelectB<kInt16>));  // lane j: group j
  const __m512i r1 = _mm512_add_epi32(_mm512_shuffle_i32x4(p[2], p[3], kSelectA<kInt16>),
                                      _mm512_shuffle_i32x4(p[2], p[3], kSelectB<kInt16>));  // group 4+j
  // 128-bit lane j: [group j, group j, group 4+j, group 4+j] partial sums.
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(r0, r1), _mm512_unpackhi_epi64(r0, r1));
  const __m512i t = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));  // dword 0, 2 of lane j
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, t));
}

// Weight rows [n, n + R) against activation rows [i0, i0 + M) of xq, 8 groups (128 bytes per row)
// at a time. kTail: the last block, with groups_left (1..7) real groups.
template <int M, int R, bool kInt16, bool kTail>
void Int4Step(const uint8_t* const* rows, const uint16_t* const* scales, const QuantizedActivations& xq,
              int64_t i0, int64_t g, int64_t groups_left, __m256* acc) {
  for (int r = 0; r < R; ++r) {
    const uint8_t* row = rows[r] + g * 16;
    if constexpr (!kTail) {
      _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchInt4Bytes), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchInt4Bytes + 64), _MM_HINT_T1);
    }
    __m512i p[M][4];
    for (int j = 0; j < 4; ++j) {
      __m256i bytes;
      if constexpr (kTail) {
        const int64_t left = groups_left - 2 * j;
        const __mmask32 mask = left >= 2   ? __mmask32(0xffffffffu)
                               : left == 1 ? __mmask32(0xffffu)
                                           : __mmask32(0);
        bytes = _mm256_maskz_loadu_epi8(mask, row + 32 * j);
      } else {
        bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * j));
      }
      if constexpr (kInt16) {
        // Word lane l < 16: byte l of group g+2j, l >= 16: byte l-16 of group g+2j+1.
        const __m512i wide = _mm512_cvtepu8_epi16(bytes);
        const __m512i lo = _mm512_and_si512(wide, _mm512_set1_epi16(0x0f));
        const __m512i hi = _mm512_srli_epi16(wide, 4);
        for (int i = 0; i < M; ++i) {
          const int16_t* q = xq.q16.data() + (i0 + i) * xq.row_elements + (g + 2 * j) * 32;
          p[i][j] = _mm512_dpwssd_epi32(_mm512_madd_epi16(lo, _mm512_loadu_si512(q)), hi,
                                        _mm512_loadu_si512(q + 32));
        }
      } else {
        // Bytes [low nibbles of both groups | high nibbles of both groups], as unsigned bytes.
        const __m512i both = _mm512_broadcast_i64x4(bytes);
        const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(both, __mmask32(0xffff0000u), both, 4),
                                           _mm512_set1_epi8(0x0f));
        for (int i = 0; i < M; ++i) {
          const int8_t* q = xq.q8.data() + (i0 + i) * xq.row_elements + (g + 2 * j) * 32;
          p[i][j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(q));
        }
      }
    }
    const __mmask8 gmask = kTail ? __mmask8((1u << groups_left) - 1) : __mmask8(0xff);
    const __m128i ws_bits = kTail ? _mm_maskz_loadu_epi16(gmask, scales[r] + g)
                                  : _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales[r] + g));
    const __m256 wscale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(ws_bits), 16));
    for (int i = 0; i < M; ++i) {
      const float* xs = xq.scale.data() + (i0 + i) * xq.groups + g;
      const float* corr = xq.corr.data() + (i0 + i) * xq.groups + g;
      const __m256 t = _mm256_fmsub_ps(_mm256_cvtepi32_ps(ReduceFourPairs<kInt16>(p[i])),
                                       kTail ? _mm256_maskz_loadu_ps(gmask, xs) : _mm256_loadu_ps(xs),
                                       kTail ? _mm256_maskz_loadu_ps(gmask, corr) : _mm256_loadu_ps(corr));
      acc[r * M + i] = _mm256_fmadd_ps(wscale, t, acc[r * M + i]);
    }
  }
}

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
  __m256 acc[R * M];
  for (int a = 0; a < R * M; ++a) acc[a] = _mm256_setzero_ps();
  for (int64_t g = 0; g < full; g += 8) Int4Step<M, R, kInt16, false>(rows, scales, xq, i0, g, 8, acc);
  if (full < groups) Int4Step<M, R, kInt16, true>(rows, scales, xq, i0, full, groups - full, acc);
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) y[(i0 + i) * n_total + n + r] = HorizontalSum(acc[r * M + i]);
  }
}

}  // namespace

void GemvBf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  BlockKernels::Bf16(w, x, m, y, n0, n1);
}

void GemvFp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  BlockKernels::Fp8(w, x, m, y, n0, n1);
}

void GemvFp8Direct(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  DirectFp8Kernels::Fp8(w, x, m, y, n0, n1);
}

void GemvInt4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1) {
  BlockKernels::Int4(w, xq, y, n0, n1);
}

}  // namespace tandem::engine::kernels::cpu::avx512
