#pragma once
// The ISA variants behind engine/kernels/cpu/mla_prefill.h: the score and weighted-sum loops of
// mla_prefill_tiles.h, built with each variant's flags (avx512/mla_prefill_avx512.cc,
// avx2/mla_prefill_avx2.cc, the portable ones in mla_prefill.cc), which only mla_prefill.cc calls
// after ActiveKernelIsa() says the host runs them. No intrinsics here.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

// s[t·kMlaPrefillKeyBlock + j] = Σ_d q[t][d] · kt[d·kMlaPrefillKeyBlock + j] (t < nq, j < the
// block, d < width); kt is the key block transposed, missing keys zero.
using PrefillScoresFn = void (*)(const float* const* q, int64_t nq, const float* kt, int64_t width, float* s);
// o[t][d] += Σ_j p[t·kMlaPrefillKeyBlock + j] · (v + j·v_stride)[d] (t < nq, d < vdim, j < n).
using PrefillSumsFn = void (*)(const float* p, int64_t nq, const float* v, int64_t v_stride, int64_t n,
                               int64_t vdim, float* const* o);

namespace avx512 {
void PrefillScores(const float* const* q, int64_t nq, const float* kt, int64_t width, float* s);
void PrefillSums(const float* p, int64_t nq, const float* v, int64_t v_stride, int64_t n, int64_t vdim,
                 float* const* o);
}  // namespace avx512

namespace avx2 {
void PrefillScores(const float* const* q, int64_t nq, const float* kt, int64_t width, float* s);
void PrefillSums(const float* p, int64_t nq, const float* v, int64_t v_stride, int64_t n, int64_t vdim,
                 float* const* o);
}  // namespace avx2

}  // namespace tandem::engine::kernels::cpu
