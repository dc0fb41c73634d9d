#pragma once
// Vector loops of the forward pass's hot paths outside the matmuls and the paged attention
// kernels (attention.h): router logits, softmax exponentials, residual adds, weighted row sums. Variants:
// AVX-512 and AVX2 (engine/kernels/cpu/avx512|avx2/vector_ops_*.cc) and portable; each call takes
// ActiveKernelIsa() (the host's widest under the TANDEM_ISA ceiling), so an AVX-512 host runs and tests the
// AVX2 and portable code too (SetKernelIsaCeiling). DotF32 fuses (FMA) and its bits depend on the variant;
// the others round each product as the plain C++ loop does and give its bits in every variant
// (vector_ops_test.cc checks both). The *Ref twins are the scalar oracles (double arithmetic, rounded once)
// the tests hold every variant to.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

// Σ a[i]·b[i] in fp32: fused multiply-adds into independent SIMD accumulators (16-lane with
// AVX-512, 8-lane with AVX2+FMA, 8 scalar chains otherwise), then one tree reduction. The forward
// pass's router logits and attention scores: like Hugging Face's fp32 router and fp32-accumulated
// attention, within n · 2^-24 · Σ|a·b| of the exact sum (tested); the result depends on the ISA.
float DotF32(const float* a, const float* b, int64_t n);

// out[d] = Σ_j w[j]·rows[j·stride + d] for d < dim over the rows j < n with w[j] != 0, in fp32,
// row by row in order: the same values as zero-filling out and calling AddScaledF32 per row, with
// the partial sums held in registers across rows instead of reloaded and stored for each.
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out);

// y[i] = e^x[i] in fp32 (y may be x) from multiplies and adds only, so every variant (AVX-512,
// AVX2, portable) gives the same bits: within 2 ulp of the exact value (tested); 0 below
// ln(FLT_MIN) (never an fp32 subnormal), finite up to 88.7 (larger inputs give e^88.7), NaN for NaN.
void ExpF32(const float* x, float* y, int64_t n);

// y[i] += a * x[i] for i < n, in fp32 (multiply, then add): the same values as the scalar loop.
void AddScaledF32(float a, const float* x, float* y, int64_t n);

// The oracles: exact products summed in double and rounded once (DotF32Ref, WeightedRowSumRef);
// e^min(x, 88.7) in double rounded once, with ExpF32's edges (0 below ln(FLT_MIN), NaN for NaN);
// y[i] + a·x[i] in double rounded once (AddScaledF32Ref: within an ulp of AddScaledF32's two
// roundings).
float DotF32Ref(const float* a, const float* b, int64_t n);
void WeightedRowSumRef(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out);
void ExpF32Ref(const float* x, float* y, int64_t n);
void AddScaledF32Ref(float a, const float* x, float* y, int64_t n);

// "avx512", "avx2" or "portable": the variant the calls above take now.
const char* VectorOpsIsa();

}  // namespace tandem::engine::kernels::cpu
