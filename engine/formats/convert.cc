#include "engine/formats/convert.h"

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
const bool kHostAvx512Bw = HostCpuFeatures().HasAvx512Kernels();
#endif

}  // namespace

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
  if (kHostAvx512Bw && symmetric) {
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
