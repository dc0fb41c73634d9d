// Scalar reference quantizers and dequantizers for the checkpoint weight formats in weights.h.
//
// INT4 — compressed-tensors `pack-quantized`, num_bits 4, symmetric, strategy group, group 32.
// Checked against compressed-tensors 0.20.1, its eager PyTorch path (CPU tensors):
// scripts/gen_int4_goldens.py writes formats/testdata/int4_goldens.json, weights_test.cc reads it.
// The library quantizes a bf16 weight with bf16 tensor arithmetic, so every step below rounds
// to bf16 (round to nearest even) exactly where a bf16 torch op would:
//   wb    = bf16(w)                           the checkpoint's source weights are bf16
//   amax  = max |wb| over the group           calculate_qparams clamps min <= 0 <= max
//   scale = bf16(amax / 7.5)                  7.5 = (q_max - q_min) / 2 = (7 - (-8)) / 2
//   scale = 2^-7 if scale == 0                torch.finfo(bfloat16).eps; all-zero groups
//   q     = rint(clamp(bf16(wb / scale), -8, 7))   clamp then round half to even
//   stored nibble = q + 8 (0..15); element k of a row is nibble k%8 (bits [4(k%8), 4(k%8)+4))
//   of int32 word k/8: little nibble first, so group g is words 4g..4g+3.
// The quotient is rounded to bf16 before rint: 3.498 becomes bf16 3.5 and then 4 (fp32 gives 3).
// +amax lands on 7.5 and clamps to 7; -amax lands on -7.5 and rounds (half even) to -8.
// Padding: pack_to_int32 pads a row to a multiple of 32 elements with nibble 0 (not 8) and
// keeps ceil(K/8) words, so a K % 8 != 0 row ends in a word whose upper nibbles are 0.
// The library refuses group quantization when K % 32 != 0 ("tensor column shape must be
// divisible by the given group_size"), so ValidateInt4Shapes rejects such checkpoints. The
// quantizer still accepts them: the partial last group's scale is that of the group padded with
// zeros (padding cannot change amax), which is what the library gives for the zero-padded
// tensor, and its packing matches pack_to_int32 on the truncated row.
// Dequantize: w = q * scale in fp32 (exact: 4-bit q times an 8-bit mantissa). The library's
// decompress returns bf16(q * scale); bf16(our output) equals it bit for bit.
// Not reproduced: 0.20.1 also has a Triton quantize kernel, used for CUDA tensors, that divides in
// fp32 without rounding the quotient to bf16; it differs by one step wherever bf16(wb / scale)
// rounds onto a .5 (about 1% of codes on the random goldens; the generator counts them).
//
// FP8 — 128x128 blocks, e4m3 (OCP e4m3fn), one fp32 `weight_scale_inv` per block. DeepSeek has
// not published its weight converter; this is the rule of its block quantizer act_quant_kernel
// (DeepSeek-V3 inference/kernel.py, releases with scale_fmt) applied to 128x128 blocks, in fp32:
//   amax      = max(max |w| over the block's real elements, 1e-4)
//   scale_inv = amax / 448
//   data      = e4m3(w / scale_inv), round to nearest even, saturating at +-448
// The 1e-4 floor keeps an all-zero block's scale positive (1e-4 / 448, data all 0) instead of
// 0 / 0 = NaN. Partial blocks at the right or bottom edge use only their real elements, which is
// the same as zero padding. Dequantize: w = e4m3(data) * scale_inv in fp32.
//
// Inputs should be finite: NaN or inf in w give meaningless (but defined) codes and scales.

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/formats/float_codecs.h"
#include "engine/formats/weights.h"

namespace tandem::engine {
namespace {

constexpr float kInt4ScaleDivisor = 7.5f;
constexpr uint16_t kBf16Eps = 0x3c00;  // 2^-7
constexpr float kFp8AmaxFloor = 1e-4f;

float RoundBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

// The bf16 scale of one group of `count` weights (count <= 32).
uint16_t Int4GroupScale(const float* w, int64_t count) {
  float amax = 0.0f;
  for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(RoundBf16(w[i])));
  uint16_t scale = FloatToBf16(amax / kInt4ScaleDivisor);
  return scale == 0 ? kBf16Eps : scale;
}

int8_t Int4Quantize(float w, float scale) {
  float q = RoundBf16(RoundBf16(w) / scale);
  q = std::isnan(q) ? 0.0f : std::clamp(q, -8.0f, 7.0f);  // NaN to int8 would be undefined
  return static_cast<int8_t>(std::nearbyint(q));
}

}  // namespace

void PackInt4Ref(const int8_t* q, int64_t rows, int64_t cols, int32_t* packed) {
  const int64_t words = Int4PackedCols(cols);
  for (int64_t n = 0; n < rows; ++n) {
    const int8_t* q_row = q + n * cols;
    int32_t* out = packed + n * words;
    for (int64_t w = 0; w < words; ++w) {
      uint32_t word = 0;
      const int64_t end = std::min<int64_t>(kInt4PerInt32, cols - w * kInt4PerInt32);
      for (int64_t j = 0; j < end; ++j) {
        const uint32_t nibble = static_cast<uint32_t>(q_row[w * kInt4PerInt32 + j] + 8) & 0xfu;
        word |= nibble << (4 * j);
      }
      out[w] = static_cast<int32_t>(word);
    }
  }
}

void UnpackInt4Ref(const int32_t* packed, int64_t rows, int64_t cols, int8_t* q) {
  const int64_t words = Int4PackedCols(cols);
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) {
      const uint32_t word = static_cast<uint32_t>(packed[n * words + k / kInt4PerInt32]);
      const int nibble = static_cast<int>((word >> (4 * (k % kInt4PerInt32))) & 0xfu);
      q[n * cols + k] = static_cast<int8_t>(nibble - 8);
    }
  }
}

void QuantizeInt4Group32Ref(const float* w, int64_t rows, int64_t cols, int32_t* packed, uint16_t* scale) {
  const int64_t groups = Int4ScaleCols(cols);
  const int64_t words = Int4PackedCols(cols);
  int8_t q_row[kInt4GroupSize];
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * kInt4GroupSize;
      const int64_t count = std::min(kInt4GroupSize, cols - k0);
      const float* group = w + n * cols + k0;
      const uint16_t s_bits = Int4GroupScale(group, count);
      scale[n * groups + g] = s_bits;
      const float s = Bf16ToFloat(s_bits);
      for (int64_t i = 0; i < count; ++i) q_row[i] = Int4Quantize(group[i], s);
      // Words of this group; count is a multiple of 8 except in the tail.
      PackInt4Ref(q_row, 1, count, packed + n * words + k0 / kInt4PerInt32);
    }
  }
}

void DequantizeInt4Group32Ref(const Int4GroupWeightView& w, float* out) {
  const int64_t groups = Int4ScaleCols(w.cols);
  const int64_t words = Int4PackedCols(w.cols);
  for (int64_t n = 0; n < w.rows; ++n) {
    for (int64_t k = 0; k < w.cols; ++k) {
      const uint32_t word = static_cast<uint32_t>(w.packed[n * words + k / kInt4PerInt32]);
      const int q = static_cast<int>((word >> (4 * (k % kInt4PerInt32))) & 0xfu) - 8;
      out[n * w.cols + k] = static_cast<float>(q) * Bf16ToFloat(w.scale[n * groups + k / kInt4GroupSize]);
    }
  }
}

void QuantizeFp8Block128Ref(const float* w, int64_t rows, int64_t cols, uint8_t* data, float* scale_inv) {
  const int64_t block_cols = Fp8ScaleCols(cols);
  for (int64_t br = 0; br < Fp8ScaleRows(rows); ++br) {
    const int64_t n0 = br * kFp8BlockSize;
    const int64_t n1 = std::min(rows, n0 + kFp8BlockSize);
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t k0 = bc * kFp8BlockSize;
      const int64_t k1 = std::min(cols, k0 + kFp8BlockSize);
      float amax = 0.0f;
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(w[n * cols + k]));
      }
      const float s = std::max(amax, kFp8AmaxFloor) / kFp8E4M3Max;
      scale_inv[br * block_cols + bc] = s;
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t k = k0; k < k1; ++k) data[n * cols + k] = FloatToFp8E4M3(w[n * cols + k] / s);
      }
    }
  }
}

void DequantizeFp8Block128Ref(const Fp8BlockWeightView& w, float* out) {
  const int64_t block_cols = Fp8ScaleCols(w.cols);
  for (int64_t n = 0; n < w.rows; ++n) {
    const float* s_row = w.scale_inv + (n / kFp8BlockSize) * block_cols;
    for (int64_t k = 0; k < w.cols; ++k) {
      out[n * w.cols + k] = Fp8E4M3ToFloat(w.data[n * w.cols + k]) * s_row[k / kFp8BlockSize];
    }
  }
}

void DequantizeBf16Ref(const Bf16WeightView& w, float* out) {
  for (int64_t i = 0; i < w.rows * w.cols; ++i) out[i] = Bf16ToFloat(w.data[i]);
}

namespace {

std::string Shape(int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; }

// Dimensions beyond 2^31 are not a real checkpoint and would overflow size arithmetic.
constexpr int64_t kMaxDim = int64_t{1} << 31;

Status CheckDims(int64_t rows, int64_t cols) {
  if (rows < 1 || cols < 1 || rows > kMaxDim || cols > kMaxDim) {
    return Status::InvalidArgument("weight shape " + Shape(rows, cols) +
                                   " must have dimensions in [1, 2^31]");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateInt4Shapes(int64_t rows, int64_t cols, int64_t packed_rows, int64_t packed_cols,
                          int64_t scale_rows, int64_t scale_cols) {
  RETURN_IF_ERROR(CheckDims(rows, cols));
  if (cols % kInt4GroupSize != 0) {
    return Status::InvalidArgument("int4 weight_shape " + Shape(rows, cols) +
                                   ": input features must be a multiple of the group size 32");
  }
  if (packed_rows != rows || packed_cols != Int4PackedCols(cols)) {
    return Status::InvalidArgument("int4 weight_packed is " + Shape(packed_rows, packed_cols) + ", want " +
                                   Shape(rows, Int4PackedCols(cols)) + " for weight_shape " +
                                   Shape(rows, cols));
  }
  if (scale_rows != rows || scale_cols != Int4ScaleCols(cols)) {
    return Status::InvalidArgument("int4 weight_scale is " + Shape(scale_rows, scale_cols) + ", want " +
                                   Shape(rows, Int4ScaleCols(cols)) + " for weight_shape " +
                                   Shape(rows, cols));
  }
  return Status::Ok();
}

Status ValidateFp8Shapes(int64_t rows, int64_t cols, int64_t scale_rows, int64_t scale_cols) {
  RETURN_IF_ERROR(CheckDims(rows, cols));
  if (scale_rows != Fp8ScaleRows(rows) || scale_cols != Fp8ScaleCols(cols)) {
    return Status::InvalidArgument("fp8 weight_scale_inv is " + Shape(scale_rows, scale_cols) + ", want " +
                                   Shape(Fp8ScaleRows(rows), Fp8ScaleCols(cols)) + " for weight " +
                                   Shape(rows, cols));
  }
  return Status::Ok();
}

}  // namespace tandem::engine
