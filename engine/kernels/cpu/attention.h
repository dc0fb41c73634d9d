#pragma once
// The paged attention kernels of absorbed MLA decode, read in place from the KV pages: scores of
// queries against cached rows, and weighted sums of those rows. Both cache dtypes:
//   kBf16:    bf16 bits, widened exactly;
//   kFp8E4M3: e4m3 codes, decoded exactly to their e4m3 value WITHOUT the pool's per-layer scale
//             (value = code · scale): the caller folds the scale into the softmax scale and into
//             the output, as the CUDA kernels do, so a row is never rescaled element by element.
//             Codes 0x7f / 0xff (e4m3fn's NaN) are never written (the pool saturates at ±448)
//             and give unspecified results.
// Variants: AVX-512 and AVX2 (engine/kernels/cpu/avx512|avx2/attention_*.cc) and portable; each
// call takes ActiveKernelIsa() (the host's widest, under the TANDEM_ISA ceiling), so an AVX-512
// host runs and tests the AVX2 and portable code too (SetKernelIsaCeiling).
// The *Ref twins are the scalar oracles (double accumulation) the tests hold every variant to.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

enum class RowFormat { kBf16, kFp8E4M3 };

// n rows of one run (a page's rows of one layer, or weight rows): row j starts `stride` elements
// after row j - 1. data is uint16_t (bf16) or uint8_t (e4m3) elements.
struct RowsRef {
  const void* data = nullptr;
  RowFormat format = RowFormat::kBf16;
  int64_t stride = 0;
};

// out[h·out_stride + j] = Σ_d q[h·q_stride + d] · row_j[d] for d < width, h < nq, j < n, in fp32
// (fused multiply-adds in the SIMD variants). Each (query, row) sum is computed the same way
// whatever nq, n or the row's place in the run (a request's scores never depend on its batch or
// page size), within width · 2^-24 · Σ|q·row| of the exact sum; its bits depend on the variant.
void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                     float* out, int64_t out_stride);

// nw weighted sums of the same rows, each continuing from what its output holds:
// out[h·out_stride + d] += Σ_j w[h·w_stride + j] · row_j[d] for d < dim, over the rows j < n with
// w[h·w_stride + j] != 0, row by row in order, each term multiplied then added (no fused
// multiply-add). Every variant gives the portable loop's bits, whatever nw; called run after run
// (page after page) it gives the bits of one call over all the rows.
void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                           float* out, int64_t out_stride);

// The oracles: the same sums of exact products accumulated in double, rounded once.
void AttentionScoresRef(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                        float* out, int64_t out_stride);
void AttentionWeightedSumsRef(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n,
                              int64_t dim, float* out, int64_t out_stride);

// The exact value of element i of row j (scale not applied): for tests and scalar tails.
float RowValue(RowsRef rows, int64_t j, int64_t i);

// out[j·width + d] = scale · row_j[d] in fp32 (rounded once) for j < n, d < width: the expanded
// (prefill) form's fp32 context. bf16 rows take scale 1 (widened exactly).
void RowsToF32(RowsRef rows, int64_t n, int64_t width, float scale, float* out);

// out[j·width + d] = the bf16 bits of row_j[d]'s value for j < n, d < width, from e4m3 rows
// (every e4m3 value is a bf16 value: exact). The kernels above give the same bits over these bf16
// rows as over the e4m3 rows they came from: a block of FP8 rows that many queries read is
// widened once (the FP8 kernels decode a row again for every 4 queries or weight vectors).
void Fp8RowsToBf16(RowsRef rows, int64_t n, int64_t width, uint16_t* out);

// "avx512", "avx2" or "portable": the variant the calls above take now.
const char* AttentionIsa();

}  // namespace tandem::engine::kernels::cpu
