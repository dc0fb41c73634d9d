#pragma once
// Small AVX2 helpers shared by the AVX2 kernel files. Include only from files compiled with
// -mavx2 -mfma -mf16c (engine/kernels/cpu/avx2/*.cc).

#include <cstdint>

#include <immintrin.h>

namespace tandem::engine::kernels::cpu::avx2 {

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

// Words holding an e4m3 code in their high byte -> fp16 of (value · 2^-8): the sign stays in bit
// 15, exponent and mantissa move into fp16's fields (whose exponent bias is 8 larger).
inline __m256i HalfFromCodeHigh(__m256i code_high) {
  return _mm256_and_si256(_mm256_srai_epi16(code_high, 1), _mm256_set1_epi16(static_cast<int16_t>(0xbfff)));
}

}  // namespace tandem::engine::kernels::cpu::avx2
