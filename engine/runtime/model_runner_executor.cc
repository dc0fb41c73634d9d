#include "engine/runtime/model_runner_executor.h"

#include <vector>

#include "engine/model/forward.h"
#include "engine/model/tensor_parallel.h"

namespace tandem::engine::runtime {
namespace {

// One step of either runner, each input's last row of logits.
template <typename Runner>
Status ForwardLastRows(Runner* runner, std::span<const ExecInput> batch, std::vector<float>* logits) {
  std::vector<model::StepInput> inputs;
  inputs.reserve(batch.size());
  for (const ExecInput& in : batch) inputs.push_back({in.seq, in.tokens});
  model::ForwardOptions options;
  options.all_logits = false;
  return runner->Forward(inputs, options, logits);
}

}  // namespace

int64_t ModelRunnerExecutor::vocab_size() const { return runner_->config().vocab_size; }

Status ModelRunnerExecutor::Forward(std::span<const ExecInput> batch, std::vector<float>* logits) {
  return ForwardLastRows(runner_, batch, logits);
}

int64_t TensorParallelExecutor::vocab_size() const { return runner_->config().vocab_size; }

Status TensorParallelExecutor::Forward(std::span<const ExecInput> batch, std::vector<float>* logits) {
  return ForwardLastRows(runner_, batch, logits);
}

}  // namespace tandem::engine::runtime
