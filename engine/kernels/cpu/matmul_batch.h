#pragma once
// Several Linears of one step run as one parallel job (implemented in matmul.cc): at decode every matrix of a
// MoE layer is a GEMV of a few hundred rows, too short to wake the pool for each. MatmulBatch cuts the rows
// of all its decode-sized tasks together, so one ParallelFor balances them over the threads by rows (not by
// whole matrices), and prepares activations that several tasks share once.

#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/core/thread_pool.h"
#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu {

// y[m, w->rows()] = x[m, w->cols()] · wᵀ, as Matmul(*w, x, m, y, ...).
struct MatmulTask {
  const PackedWeight* w = nullptr;
  const float* x = nullptr;
  int64_t m = 0;
  float* y = nullptr;
};

// Runs every task; each y equals what Matmul gives for that task alone, bit for bit (a row's sum
// does not depend on how rows are split). Tasks with m <= options.gemv_max_batch share one
// ParallelFor over all their rows; larger ones (prefill) run one after the other, each over the
// whole pool. Tasks may share x; their y must not overlap each other or any x.
// Errors: InvalidArgument on a null pointer or m < 1 (nothing is computed then).
Status MatmulBatch(std::span<const MatmulTask> tasks, ThreadPool* pool, const MatmulOptions& options = {});

}  // namespace tandem::engine::kernels::cpu
