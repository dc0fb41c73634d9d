#pragma once
// ModelExecutor over the CPU forward pass (model::ModelRunner): one Forward per step with
// all_logits = false, so each input yields one logits row (its last token's).

#include <memory>

#include "engine/runtime/model_executor.h"

namespace tandem::engine::model {
class ModelRunner;
class TensorParallelRunner;
}  // namespace tandem::engine::model

namespace tandem::engine::runtime {

class ModelRunnerExecutor final : public ModelExecutor {
 public:
  // REQUIRES: runner and kv outlive the executor; kv is the pool the runner was created with.
  ModelRunnerExecutor(model::ModelRunner* runner, kv::PagePool* kv) : runner_(runner), kv_(kv) {}

  int64_t vocab_size() const override;
  kv::PagePool* kv_pool() const override { return kv_; }
  Status Forward(std::span<const ExecInput> batch, std::vector<float>* logits) override;

 private:
  model::ModelRunner* runner_;
  kv::PagePool* kv_;
};

// The same over tensor-parallel CPU ranks (model/tensor_parallel.h), all over one pool.
class TensorParallelExecutor final : public ModelExecutor {
 public:
  // REQUIRES: runner and kv outlive the executor; kv is the pool the runner was created with.
  TensorParallelExecutor(model::TensorParallelRunner* runner, kv::PagePool* kv) : runner_(runner), kv_(kv) {}

  int64_t vocab_size() const override;
  kv::PagePool* kv_pool() const override { return kv_; }
  Status Forward(std::span<const ExecInput> batch, std::vector<float>* logits) override;

 private:
  model::TensorParallelRunner* runner_;
  kv::PagePool* kv_;
};

}  // namespace tandem::engine::runtime
