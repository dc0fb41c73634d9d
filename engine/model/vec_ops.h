#pragma once
// Vector loops of the forward pass's hot paths (attention, router), with AVX2 / AVX-512 variants
// picked at run time. DotF32 is the one that fuses (FMA); the others round each product as the
// plain C++ loop does.

#include <cstdint>

namespace tandem::engine::model {

// Σ a[i]·b[i] in fp32: fused multiply-adds into independent SIMD accumulators (16-lane with
// AVX-512, 8-lane with AVX2+FMA, 8 scalar chains otherwise), then one tree reduction. The forward
// pass's router logits and attention scores: like Hugging Face's fp32 router and fp32-accumulated
// attention, within n · 2^-24 · Σ|a·b| of the exact sum (tested); the result depends on the ISA.
float DotF32(const float* a, const float* b, int64_t n);

// out[d] = Σ_j w[j]·rows[j·stride + d] for d < dim over the rows j < n with w[j] != 0, in fp32,
// row by row in order: the same values as zero-filling out and calling AddScaledF32 per row, with
// the partial sums held in registers across rows instead of reloaded and stored for each.
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out);

// out[i] = the fp32 value of bf16 bits in[i] (exact).
void Bf16ToF32(const uint16_t* in, float* out, int64_t n);

// y[i] += a * x[i] for i < n, in fp32 (multiply, then add): the same values as the scalar loop.
void AddScaledF32(float a, const float* x, float* y, int64_t n);

}  // namespace tandem::engine::model
