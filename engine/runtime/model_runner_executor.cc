#include "engine/runtime/model_runner_executor.h"

#include <vector>

#include "engine/model/forward.h"
#include "engine/model/tensor_parallel.h"

namespace tandem::engine::runtime {

int64_t ModelRunnerExecutor::vocab_size() const { return runner_->config().vocab_size; }

Status ModelRunnerExecutor::Forward(std::span<const ExecInput> batch, std::vector<float>* logits) {
  std::vector<model::StepInput> inputs;
  inputs.reserve(batch.size());
  for (const ExecInput& in : batch) inputs.push_back({in.seq, in.tokens});
  model::ForwardOptions options;
  options.all_logits = false;
  return runner_->Forward(inputs, options, logits);
}

int64_t TensorParallelExecutor::vocab_size() const { return runner_->config().vocab_size; }

Status TensorParallelExecutor::Forward(std::span<const ExecInput> batch, std::vector<float>* logits) {
  std::vector<model::StepInput> inputs;
  inputs.reserve(batch.size());
  for (const ExecInput& in : batch) inputs.push_back({in.seq, in.tokens});
  model::ForwardOptions options;
  options.all_logits = false;
  return runner_->Forward(inputs, options, logits);
}

}  // namespace tandem::engine::runtime
