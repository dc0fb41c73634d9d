#include "engine/formats/convert.h"

#include <atomic>
#include <cmath>

#include "engine/core/cpu_features.h"
#include "engine/core/immintrin.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine {
namespace {

#if defined(__x86_64__)
// table[c] for 32 codes at a time, for a table whose upper half is the lower half with the sign
// bit set: two 64-entry word permutes over the magnitudes, a blend on bit 6, the sign OR-ed back.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void LookupFp8Avx512(const uint16_t* table,
                                                                          const uint8_t* in, uint16_t* out,
                                                                          size_t n) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 32);
  const __m512i t2 = _mm512_loadu_si512(table + 64), t3 = _mm512_loadu_si512(table + 96);
  const __m512i bit6 = _mm512_set1_epi16(0x40), sign = _mm512_set1_epi16(0x80);
  size_t i = 0;
  for (; i < n; i += 32) {
    const __mmask32 m = n - i >= 32 ? ~__mmask32(0) : (__mmask32(1) << (n - i)) - 1;
    const __m512i codes = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, in + i));
    const __m512i lo = _mm512_permutex2var_epi16(t0, codes, t1);  // index bits 5..0
    const __m512i hi = _mm512_permutex2var_epi16(t2, codes, t3);
    const __m512i mag = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(codes, bit6), lo, hi);
    const __m512i v = _mm512_or_si512(mag, _mm512_slli_epi16(_mm512_and_si512(codes, sign), 8));
    _mm512_mask_storeu_epi16(out + i, m, v);
  }
}
// e4m3 codes of x = bf16 * inv_scale, 16 at a time: FloatToFp8E4M3's branches as lane selects.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void EncodeFp8Avx512(const uint16_t* in, uint8_t* out,
                                                                          size_t n, float inv_scale) {
  const __m512 inv = _mm512_set1_ps(inv_scale);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
  const __m512i round = _mm512_set1_epi32(0x7ffff), rebias = _mm512_set1_epi32((127 - 7) << 3);
  const __m512i sign_mask = _mm512_set1_epi32(0x80);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m512 x = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)), inv);
    const __m512i u = _mm512_castps_si512(x);
    const __m512i a = _mm512_and_si512(u, abs_mask);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), sign_mask);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), one);
    const __m512i normal =
        _mm512_sub_epi32(_mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(a, round), odd), 20), rebias);
    const __m512i sub = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f)));
    __m512i r =
        _mm512_mask_blend_epi32(_mm512_cmpge_epi32_mask(a, _mm512_set1_epi32(0x3c800000)), sub, normal);
    r = _mm512_mask_blend_epi32(_mm512_cmpge_epi32_mask(a, _mm512_set1_epi32(0x43e00000)), r,
                                _mm512_set1_epi32(0x7e));
    r = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000)), r,
                                _mm512_set1_epi32(0x7f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(_mm512_or_si512(r, sign)));
  }
  ConvertBf16ToFp8E4M3Ref(in + i, out + i, n - i, inv_scale);
}

// The same, 8 at a time with AVX2.
__attribute__((target("avx2"))) void EncodeFp8Avx2(const uint16_t* in, uint8_t* out, size_t n,
                                                   float inv_scale) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
  const __m256i round = _mm256_set1_epi32(0x7ffff), rebias = _mm256_set1_epi32((127 - 7) << 3);
  const __m256i sign_mask = _mm256_set1_epi32(0x80);
  const __m256i lanes_0_4 = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256 x = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)), inv);
    const __m256i u = _mm256_castps_si256(x);
    const __m256i a = _mm256_and_si256(u, abs_mask);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), sign_mask);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, 20), one);
    const __m256i normal =
        _mm256_sub_epi32(_mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(a, round), odd), 20), rebias);
    const __m256i sub = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(512.0f)));
    // a >= c  <=>  a > c - 1 (a is never negative)
    __m256i r = _mm256_blendv_epi8(sub, normal, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3c800000 - 1)));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7e),
                           _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x43e00000 - 1)));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7f), _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
    r = _mm256_or_si256(r, sign);
    const __m256i w = _mm256_packus_epi32(r, r);  // per 128-bit half: 4 words, twice
    const __m256i b = _mm256_packus_epi16(w, w);  // per half: 4 bytes, four times
    const __m256i both = _mm256_permutevar8x32_epi32(b, lanes_0_4);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(both));
  }
  ConvertBf16ToFp8E4M3Ref(in + i, out + i, n - i, inv_scale);
}

const bool kHostAvx512Bw = HostCpuFeatures().HasAvx512Kernels();
const bool kHostAvx2 = HostCpuFeatures().avx2;
#endif

std::atomic<ConvertIsa> g_isa_limit{ConvertIsa::kAvx512};
// The test limit and the process-wide ceiling (TANDEM_ISA, engine/core/cpu_features.h) both apply.
bool Allow(ConvertIsa isa) {
  return g_isa_limit.load(std::memory_order_relaxed) >= isa &&
         static_cast<int>(KernelIsaCeiling()) >= static_cast<int>(isa);
}

}  // namespace

void LimitConvertIsaForTesting(ConvertIsa widest) { g_isa_limit.store(widest, std::memory_order_relaxed); }

bool ConvertHostRuns(ConvertIsa isa) {
#if defined(__x86_64__)
  if (isa == ConvertIsa::kAvx512) return kHostAvx512Bw;
  if (isa == ConvertIsa::kAvx2) return kHostAvx2;
#endif
  return isa == ConvertIsa::kPortable;
}

ConvertIsa ActiveConvertIsa() {
  for (ConvertIsa isa : {ConvertIsa::kAvx512, ConvertIsa::kAvx2}) {
    if (ConvertHostRuns(isa) && g_isa_limit.load(std::memory_order_relaxed) >= isa &&
        static_cast<int>(KernelIsaCeiling()) >= static_cast<int>(isa))
      return isa;
  }
  return ConvertIsa::kPortable;
}

void ConvertBf16ToFp8E4M3(const uint16_t* in, uint8_t* out, size_t n, float inv_scale) {
#if defined(__x86_64__)
  if (kHostAvx512Bw && Allow(ConvertIsa::kAvx512)) {
    EncodeFp8Avx512(in, out, n, inv_scale);
    return;
  }
  if (kHostAvx2 && Allow(ConvertIsa::kAvx2)) {
    EncodeFp8Avx2(in, out, n, inv_scale);
    return;
  }
#endif
  ConvertBf16ToFp8E4M3Ref(in, out, n, inv_scale);
}

void ConvertBf16ToFp8E4M3Ref(const uint16_t* in, uint8_t* out, size_t n, float inv_scale) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToFp8E4M3(Bf16ToFloat(in[i]) * inv_scale);
}

void ConvertFp8E4M3ToBf16Ref(const uint8_t* in, uint16_t* out, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(Fp8E4M3ToFloat(in[i]) * scale);
}

void ConvertFp8E4M3ToBf16(const uint8_t* in, uint16_t* out, size_t n, float scale) {
  uint16_t table[256];
  for (int c = 0; c < 256; ++c) table[c] = FloatToBf16(Fp8E4M3ToFloat(static_cast<uint8_t>(c)) * scale);
#if defined(__x86_64__)
  bool symmetric = true;  // the negative codes are the positive ones with the sign bit (NaN included)
  for (int c = 0; c < 128; ++c) symmetric = symmetric && table[c | 0x80] == (table[c] | 0x8000);
  if (kHostAvx512Bw && Allow(ConvertIsa::kAvx512) && symmetric) {
    LookupFp8Avx512(table, in, out, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) out[i] = table[in[i]];
}

float Fp8E4M3ScaleForBf16(const uint16_t* in, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    float v = std::fabs(Bf16ToFloat(in[i]));
    if (std::isfinite(v) && v > amax) amax = v;
  }
  return amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
}

}  // namespace tandem::engine
