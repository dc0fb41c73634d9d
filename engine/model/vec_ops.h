#pragma once
// Vector loops of the forward pass's hot paths (attention, router, SiLU), with AVX2 / AVX-512
// variants picked at run time (the paged attention kernels over cache rows live in
// engine/kernels/cpu/attention.h). DotF32 fuses (FMA) and its bits depend on the variant; the others round
// each product as the plain C++ loop does and give its bits in every variant (tested for each variant the
// machine has).

#include <cstdint>

namespace tandem::engine::model {

// The variants, narrowest first. Each function takes the widest one the host has.
enum class VecIsa { kPortable, kAvx2, kAvx512 };

// Tests: the functions below take no variant wider than `widest` from now on (kAvx512: no limit),
// so that every variant can be checked on one machine. Not for use while other threads call them.
void LimitVecOpsIsaForTesting(VecIsa widest);
// Whether this host runs every kernel of `isa` (tests skip, naming it, what it cannot run).
bool VecOpsHostRuns(VecIsa isa);
// The widest variant the functions below take now (host, test limit and TANDEM_ISA ceiling): logs.
VecIsa ActiveVecOpsIsa();

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

// y[i] = e^x[i] in fp32 (y may be x) from multiplies and adds only, so every variant (AVX-512,
// portable) gives the same bits: within 2 ulp of the exact value (tested); 0 below ln(FLT_MIN)
// (never an fp32 subnormal), finite up to 88.7 (larger inputs give e^88.7), NaN for NaN.
void ExpF32(const float* x, float* y, int64_t n);

// y[i] += a * x[i] for i < n, in fp32 (multiply, then add): the same values as the scalar loop.
void AddScaledF32(float a, const float* x, float* y, int64_t n);

}  // namespace tandem::engine::model
