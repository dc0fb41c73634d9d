#pragma once
// Row-wise pieces of the forward pass on fp32 activations: RMSNorm, LayerNorm (GLM's indexer
// keys), RoPE and SwiGLU's activation. The norms sum and RoPE rotates in double, the same code for
// every ISA (their own oracles); SiluMul takes the vectorized ExpF32 and has a double twin, SiluMulRef.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

// x[r] <- x[r] / sqrt(mean(x[r]^2) + eps) * weight, for each of `rows` rows of `dim` values read
// with a row stride of `stride` (>= dim): normalizes a column slice in place.
void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight, double eps);

// LayerNorm of each row: (x - mean) / sqrt(var + eps) * weight + bias. x: [rows, dim].
void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, double eps);

// A RoPE's frequencies (model::Rope builds them from the config: YaRN blending, attention factor).
struct RopeTable {
  const double* inv_freq = nullptr;  // [dim / 2]
  int64_t dim = 0;                   // rotary values per vector
  bool interleave = true;            // pairs (2i, 2i+1) (DeepSeek / GLM checkpoints), else (i, i + dim/2)
  double attention_factor = 1.0;     // multiplies cos and sin
};

// Rotates `count` vectors of table.dim values, vector j at x + j * stride, all at position `pos`:
// pair i by pos * inv_freq[i], angles, cos and sin in double, each value rounded once.
void ApplyRope(const RopeTable& table, float* x, int64_t count, int64_t stride, int64_t pos);

// gate[i] <- silu(gate[i]) * up[i] for n values (SwiGLU's activation).
void SiluMul(float* gate, const float* up, int64_t n);
// The oracle: silu in double, rounded once.
void SiluMulRef(float* gate, const float* up, int64_t n);

}  // namespace tandem::engine::kernels::cpu
