#pragma once
// Scalar codecs for the engine's small float types: BF16, FP16, FP8 E4M3 and FP8 E5M2.
//
// Every encoder rounds to nearest, ties to even, and handles subnormals. Overflow:
//   - E4M3 (OCP "e4m3fn": no infinities, NaN = 0x7F/0xFF, finite max 448) saturates to ±448;
//   - BF16, FP16 and E5M2 (IEEE-like) overflow to ±inf.
// NaN encodes to the format's canonical quiet NaN with the input's sign.
//
// These functions are __host__ __device__ when compiled by nvcc, so the CUDA kernels and the CPU
// reference run the very same arithmetic. Header-only, no dependencies.

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

namespace tandem::engine {

constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8E5M2Max = 57344.0f;
constexpr float kFp16Max = 65504.0f;

TANDEM_HD uint32_t FloatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
TANDEM_HD float BitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// ---- BF16: the upper half of an IEEE float32 --------------------------------------------
TANDEM_HD uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
TANDEM_HD float Bf16ToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// ---- FP16: IEEE binary16 -----------------------------------------------------------------
TANDEM_HD uint16_t FloatToFp16(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x38800000u) {  // |f| >= 2^-14: normal range (or overflow)
    uint32_t r = (a + 0xfffu + ((a >> 13) & 1u)) >> 13;
    r -= (127u - 15u) << 10;
    return sign | static_cast<uint16_t>(r >= 0x7c00u ? 0x7c00u : r);
  }
  // Subnormal: multiples of 2^-24; a result of 1024 is the smallest normal, encoded the same way.
  return sign | static_cast<uint16_t>(rintf(BitsFloat(a) * 16777216.0f));
}
TANDEM_HD float Fp16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return BitsFloat(FloatBits(v) | sign);
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
}

// ---- FP8 E4M3 (bias 7, 3 mantissa bits, saturating) --------------------------------------
TANDEM_HD uint8_t FloatToFp8E4M3(float f) {
  uint32_t u = FloatBits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;
  if (a >= 0x43e00000u) return sign | 0x7eu;  // |f| >= 448 (inf too): saturate
  if (a >= 0x3c800000u) {                     // |f| >= 2^-6: normal
    uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
    return sign | static_cast<uint8_t>(r - ((127u - 7u) << 3));
  }
  // Subnormal: multiples of 2^-9 (8 is the smallest normal, 0x08).
  return sign | static_cast<uint8_t>(rintf(BitsFloat(a) * 512.0f));
}
TANDEM_HD float Fp8E4M3ToFloat(uint8_t c) {
  uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  uint32_t exp = (c >> 3) & 0xfu;
  uint32_t mant = c & 0x7u;
  if (exp == 15 && mant == 7) return BitsFloat(sign | 0x7fc00000u);
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 512.0f);
    return BitsFloat(FloatBits(v) | sign);
  }
  return BitsFloat(sign | ((exp + 127u - 7u) << 23) | (mant << 20));
}

// ---- FP8 E5M2 (bias 15, 2 mantissa bits, IEEE-like with infinities) ----------------------
TANDEM_HD uint8_t FloatToFp8E5M2(float f) {
  uint32_t u = FloatBits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7eu;
  if (a >= 0x38800000u) {  // |f| >= 2^-14: normal (or overflow to inf)
    uint32_t r = (a + 0xfffffu + ((a >> 21) & 1u)) >> 21;
    r -= (127u - 15u) << 2;
    return sign | static_cast<uint8_t>(r >= 0x7cu ? 0x7cu : r);
  }
  // Subnormal: multiples of 2^-16.
  return sign | static_cast<uint8_t>(rintf(BitsFloat(a) * 65536.0f));
}
TANDEM_HD float Fp8E5M2ToFloat(uint8_t c) {
  // E5M2 is the upper byte of an FP16.
  return Fp16ToFloat(static_cast<uint16_t>(c) << 8);
}

}  // namespace tandem::engine
