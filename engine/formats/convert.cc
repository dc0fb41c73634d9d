#include "engine/formats/convert.h"

#include <cmath>

#include "engine/formats/float_codecs.h"

namespace tandem::engine {

void ConvertBf16ToFp8E4M3Ref(const uint16_t* in, uint8_t* out, size_t n, float inv_scale) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToFp8E4M3(Bf16ToFloat(in[i]) * inv_scale);
}

void ConvertFp8E4M3ToBf16Ref(const uint8_t* in, uint16_t* out, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(Fp8E4M3ToFloat(in[i]) * scale);
}

void ConvertFp8E4M3ToBf16(const uint8_t* in, uint16_t* out, size_t n, float scale) {
  uint16_t table[256];
  for (int c = 0; c < 256; ++c) table[c] = FloatToBf16(Fp8E4M3ToFloat(static_cast<uint8_t>(c)) * scale);
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
