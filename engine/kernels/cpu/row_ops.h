#pragma once
// Row-wise pieces of the forward pass on fp32 activations: RMSNorm, LayerNorm (GLM's indexer
// keys) and SwiGLU's activation. The norms sum in double and are the same code for every ISA
// (their own oracles); SiluMul takes the vectorized ExpF32 and has a double twin, SiluMulRef.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

// x[r] <- x[r] / sqrt(mean(x[r]^2) + eps) * weight, for each of `rows` rows of `dim` values read
// with a row stride of `stride` (>= dim): normalizes a column slice in place.
void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight, double eps);

// LayerNorm of each row: (x - mean) / sqrt(var + eps) * weight + bias. x: [rows, dim].
void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, double eps);

// gate[i] <- silu(gate[i]) * up[i] for n values (SwiGLU's activation).
void SiluMul(float* gate, const float* up, int64_t n);
// The oracle: silu in double, rounded once.
void SiluMulRef(float* gate, const float* up, int64_t n);

}  // namespace tandem::engine::kernels::cpu
