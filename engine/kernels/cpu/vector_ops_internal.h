#pragma once
// The ISA variants behind engine/kernels/cpu/vector_ops.h (same contracts), defined in
// avx512/vector_ops_avx512.cc and avx2/vector_ops_avx2.cc, which only vector_ops.cc calls, after
// ActiveKernelIsa() says the host runs them; and ExpF32's constants, which every variant shares so
// that all of them compute the same operations. No intrinsics here.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

// Inputs below kExpLow give 0 (e^x would be an fp32 subnormal, and products with subnormals cost a
// microcode assist per instruction on Intel cores), above kExpHigh are clamped (e^88.7 is still
// finite); ln 2 split in two so that n · kLn2Hi is exact for |n| < 512.
inline constexpr float kExpLow = -87.33654f;  // ln(FLT_MIN)
inline constexpr float kExpHigh = 88.7f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693145751953125f;
inline constexpr float kLn2Lo = 1.42860682030941723e-6f;
// 1/k! for k = 7 down to 2: e^r by its Taylor series to degree 7 on |r| <= ln2/2 (truncation
// below 6e-9 relative, under an ulp).
inline constexpr float kExpTaylor[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f};

// DotF32's portable variant: Σ a·b over 8 chains (multiply, then add), the tail on chain 0, reduced
// as a tree. The attention kernels' portable scores use it too.
float DotF32Portable(const float* a, const float* b, int64_t n);

namespace avx512 {
float DotF32(const float* a, const float* b, int64_t n);
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out);
void ExpF32(const float* x, float* y, int64_t n);
}  // namespace avx512

namespace avx2 {
float DotF32(const float* a, const float* b, int64_t n);
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out);
void ExpF32(const float* x, float* y, int64_t n);
void AddScaledF32(float a, const float* x, float* y, int64_t n);
}  // namespace avx2

}  // namespace tandem::engine::kernels::cpu
