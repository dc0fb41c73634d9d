#pragma once
// Vector loops of the forward pass's hot paths (attention, router), with AVX2 variants picked at
// run time. None uses FMA contraction: each product is rounded as the plain C++ loop rounds it.

#include <cstdint>

namespace tandem::engine::model {

// Σ a[i]·b[i] over fp32 inputs, accumulated in double (the sums that decide accuracy: router
// logits, attention scores). Products are exact in double; the result differs from a sequential
// double sum only by the order of the additions (independent accumulators, SIMD lanes).
double DotF64(const float* a, const float* b, int64_t n);

// The same sum with `a` already widened to double (a vector dotted with many others: a query
// against every context row, the router input against every expert): half the conversions and
// four independent accumulators. Differs from DotF64 only by the order of the additions.
double DotF64(const double* a, const float* b, int64_t n);

// out[i] = double(in[i]) for i < n (exact).
void F32ToF64(const float* in, double* out, int64_t n);

// out[d] = Σ_j w[j]·rows[j·stride + d] for d < dim over the rows j < n with w[j] != 0, in fp32,
// row by row in order: the same values as zero-filling out and calling AddScaledF32 per row, with
// the partial sums held in registers across rows instead of reloaded and stored for each.
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out);

// out[i] = the fp32 value of bf16 bits in[i] (exact).
void Bf16ToF32(const uint16_t* in, float* out, int64_t n);

// y[i] += a * x[i] for i < n, in fp32 (multiply, then add): the same values as the scalar loop.
void AddScaledF32(float a, const float* x, float* y, int64_t n);

}  // namespace tandem::engine::model
