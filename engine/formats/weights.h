#pragma once
// Weight formats in checkpoint layout, defined once (FACTS.md "Weight formats"), with scalar
// reference (*_ref) quantizers and dequantizers. Kernels repack these at load time
// (engine/kernels/cpu/); the views here are what a checkpoint holds.
//
// Every matrix is a Linear weight: W[N, K] with N = output features (rows), K = input features,
// row-major, y = x · Wᵀ.

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace tandem::engine {

// ---- bf16 dense ------------------------------------------------------------------------------
// data: [N, K] bf16 bits.
struct Bf16WeightView {
  const uint16_t* data = nullptr;
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
};

// ---- fp8 e4m3 with 128x128 block scales (DeepSeek / GLM checkpoints) ------------------------
constexpr int64_t kFp8BlockSize = 128;
// data: [N, K] e4m3 codes; scale_inv: [ceil(N/128), ceil(K/128)] fp32 (`weight_scale_inv`).
// Dequantized w[n][k] = e4m3(data[n][k]) * scale_inv[n/128][k/128].
struct Fp8BlockWeightView {
  const uint8_t* data = nullptr;
  const float* scale_inv = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};
constexpr int64_t Fp8ScaleRows(int64_t rows) { return (rows + kFp8BlockSize - 1) / kFp8BlockSize; }
constexpr int64_t Fp8ScaleCols(int64_t cols) { return (cols + kFp8BlockSize - 1) / kFp8BlockSize; }

// ---- int4 compressed-tensors pack-quantized: symmetric, group 32 along K --------------------
constexpr int64_t kInt4GroupSize = 32;
constexpr int64_t kInt4PerInt32 = 8;
// One group of 32 weights as packed along K: 4 int32 words, 8 nibbles each. Nibble j of word w
// holds element 8*w + j in bits [4j, 4j+4), stored as (q + 8), q in [-8, 7].
struct Int4Group32Packed {
  uint32_t words[kInt4GroupSize / kInt4PerInt32];
};
static_assert(sizeof(Int4Group32Packed) == 16, "32 nibbles are 16 bytes");

// packed: [N, ceil(K/8)] int32 (`weight_packed`); scale: [N, ceil(K/32)] bf16 (`weight_scale`);
// `weight_shape` = [N, K]. Dequantized w[n][k] = (nibble(n,k) - 8) * scale[n][k/32].
struct Int4GroupWeightView {
  const int32_t* packed = nullptr;
  const uint16_t* scale = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};
constexpr int64_t Int4PackedCols(int64_t cols) { return (cols + kInt4PerInt32 - 1) / kInt4PerInt32; }
constexpr int64_t Int4ScaleCols(int64_t cols) { return (cols + kInt4GroupSize - 1) / kInt4GroupSize; }

// ---- scalar reference quantizers / dequantizers -----------------------------------------------
// REQUIRES: output buffers sized as the views above describe; rows, cols >= 1.

// Round-to-nearest symmetric int4 with one scale per group of 32 along K, bit-compatible with
// compressed-tensors' `pack-quantized` (see formats/weights_ref.cc for the exact rules).
void QuantizeInt4Group32Ref(const float* w, int64_t rows, int64_t cols, int32_t* packed, uint16_t* scale);
void DequantizeInt4Group32Ref(const Int4GroupWeightView& w, float* out);
// q: [N, K] int4 values in [-8, 7] held in int8 <-> packed: [N, ceil(K/8)] as `weight_packed`.
// Nibbles past K in a row's last word are 0, as compressed-tensors' pack_to_int32 leaves them.
void PackInt4Ref(const int8_t* q, int64_t rows, int64_t cols, int32_t* packed);
void UnpackInt4Ref(const int32_t* packed, int64_t rows, int64_t cols, int8_t* q);

// FP8 e4m3 with one fp32 scale per 128x128 block (scale_inv = max(max|block|, 1e-4) / 448).
void QuantizeFp8Block128Ref(const float* w, int64_t rows, int64_t cols, uint8_t* data, float* scale_inv);
void DequantizeFp8Block128Ref(const Fp8BlockWeightView& w, float* out);

void DequantizeBf16Ref(const Bf16WeightView& w, float* out);

// Checks the shapes a checkpoint declares against what the format needs.
Status ValidateInt4Shapes(int64_t rows, int64_t cols, int64_t packed_rows, int64_t packed_cols,
                          int64_t scale_rows, int64_t scale_cols);
Status ValidateFp8Shapes(int64_t rows, int64_t cols, int64_t scale_rows, int64_t scale_cols);

}  // namespace tandem::engine
