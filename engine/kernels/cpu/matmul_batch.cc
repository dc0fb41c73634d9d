#include "engine/kernels/cpu/matmul_batch.h"

#include <string>

namespace tandem::engine::kernels::cpu {

Status MatmulBatch(std::span<const MatmulTask> tasks, ThreadPool* pool, const MatmulOptions& options) {
  for (size_t t = 0; t < tasks.size(); ++t) {
    const MatmulTask& task = tasks[t];
    if (task.w == nullptr || task.x == nullptr || task.y == nullptr || task.m < 1)
      return Status::InvalidArgument("matmul batch: task " + std::to_string(t) +
                                     " has a null pointer or m < 1");
  }
  if (pool == nullptr) return Status::InvalidArgument("matmul batch: null pool");
  for (const MatmulTask& task : tasks)
    RETURN_IF_ERROR(Matmul(*task.w, task.x, task.m, task.y, pool, options));
  return Status::Ok();
}

}  // namespace tandem::engine::kernels::cpu
