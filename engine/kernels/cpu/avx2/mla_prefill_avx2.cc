// AVX2 loops of the expanded MLA attention (engine/kernels/cpu/mla_prefill.h): mla_prefill_tiles.h
// at 8 lanes with 8 accumulators, compiled with the AVX2 kernel flags and -ffp-contract=fast (each
// step of a score's or a sum's chain one fused multiply-add); mla_prefill.cc calls them only when
// ActiveKernelIsa() allows.
#include "engine/kernels/cpu/mla_prefill_internal.h"
#include "engine/kernels/cpu/mla_prefill_tiles.h"

namespace tandem::engine::kernels::cpu::avx2 {

void PrefillScores(const float* const* q, int64_t nq, const float* kt, int64_t width, float* s) {
  prefill_tiles::Scores<8, 8>(q, nq, kt, width, s);
}

void PrefillSums(const float* p, int64_t nq, const float* v, int64_t v_stride, int64_t n, int64_t vdim,
                 float* const* o) {
  prefill_tiles::Sums<8, 8>(p, nq, v, v_stride, n, vdim, o);
}

}  // namespace tandem::engine::kernels::cpu::avx2
