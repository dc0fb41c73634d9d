#pragma once
// ModelRunner: the CPU forward pass of deepseek_v3 (Kimi K2.x) and glm_moe_dsa (GLM 5.x), written
// once for both (docs/forward-pass.md):
//   embed -> per layer [RMSNorm -> MLA (+ DSA indexer) -> +residual -> RMSNorm -> MLP | MoE ->
//   +residual] -> RMSNorm -> lm_head.
// A step takes several sequences at once, each with any number of new tokens (varlen prefill,
// chunked prefill continuing a cached prefix, batched decode, or a mix), packed row by row.
// Activations are fp32; every Linear, norm, activation and attention core runs through a
// kernels::Backend (ForwardOptions::backend; the CPU kernels by default), each Linear in the
// weight's own format (bf16, fp8 block-128, int4 group-32); the MLA latent and GLM's DSA indexer
// keys are cached in the PagePool (bf16 or fp8).
//
// Thread safety: one step at a time per runner (the ThreadPool and the PagePool are shared state).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/core/communicator.h"
#include "engine/core/thread_pool.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward_ops.h"
#include "engine/model/forward_types.h"
#include "engine/model/mla_attention.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::kernels {
class Backend;  // engine/kernels/backend.h
}  // namespace tandem::engine::kernels

namespace tandem::engine::model {

// A sequence's part of one step: its state and the tokens it adds.
struct StepInput {
  KvSequence* seq = nullptr;
  std::span<const int32_t> tokens;  // >= 1 token ids
};

struct ForwardOptions {
  MlaForm form = MlaForm::kAuto;
  // false: GLM attends densely and writes no indexer keys (tests: a sequence run so must not
  // continue with the indexer on).
  bool use_indexer = true;
  // false: logits only for each input's last token ([batch, vocab]), what sampling needs.
  bool all_logits = true;
  // Where the step's computations run (engine/kernels/backend.h). Null: the CPU kernels over the
  // runner's ThreadPool with `matmul` (kernels::cpu::CpuBackend), what serving runs.
  const kernels::Backend* backend = nullptr;
  kernels::cpu::MatmulOptions matmul;  // the CPU backend's Linears, when backend is null
};

class ModelRunner {
 public:
  // REQUIRES: weights, pool and kv outlive the runner. InvalidArgument when the PagePool's shape
  // (layers, kv_lora_rank, rope dim, GLM's indexer rows) is not KvShapeFor(the model).
  static StatusOr<std::unique_ptr<ModelRunner>> Create(const ModelWeights& weights, ThreadPool* pool,
                                                       kv::PagePool* kv);

  const ModelConfig& config() const { return weights_.config; }

  // Tensor / expert parallelism (engine/model/tensor_parallel.h): this runner is one rank and
  // holds that rank's shard of the weights; after each layer's attention and MLP / MoE its partial
  // output is summed over the ranks (comm->AllReduceSum). Every rank must run the same steps.
  // REQUIRES: comm outlives the runner; not while a step runs.
  void SetCommunicator(Communicator* comm) { comm_ = comm; }
  // (token, routed expert) pairs this runner's MoE layers have run since it was made.
  int64_t routed_pairs() const { return routed_pairs_; }

  // Pages `seq` must hold before a step adding `new_tokens` tokens.
  int64_t PagesNeeded(const KvSequence& seq, int64_t new_tokens) const;

  // Runs one step: appends each input's tokens to its sequence (KV rows and indexer keys in its
  // pages, num_tokens) and writes logits [Σ tokens, vocab] fp32, rows in input order ([batch,
  // vocab], each input's last token, when !options.all_logits).
  // Errors (nothing is written for any sequence): InvalidArgument for an empty input, a null or
  // repeated sequence or a token id outside the vocabulary; FailedPrecondition when a sequence
  // lacks pages (PagesNeeded) or names a page outside the pool. A later failure leaves num_tokens
  // unchanged and may have written page slots past it, which are don't-care: the step can be
  // retried as it was.
  Status Forward(std::span<const StepInput> batch, const ForwardOptions& options, std::vector<float>* logits);

  // Forward with the default forms: prompts (or prompt chunks) and single decode tokens alike.
  Status Prefill(std::span<const StepInput> batch, std::vector<float>* logits) {
    return Forward(batch, {}, logits);
  }
  Status Decode(std::span<const StepInput> batch, std::vector<float>* logits) {
    return Forward(batch, {}, logits);
  }

 private:
  ModelRunner(const ModelWeights& weights, ThreadPool* pool, kv::PagePool* kv);
  Status Validate(std::span<const StepInput> batch) const;
  Status Layer(int64_t layer, std::span<const AttnSegment> segs, int64_t tokens,
               const ForwardOptions& options, const kernels::Backend& be, std::vector<KeyMask>* index_masks,
               std::vector<float>* x) const;

  const ModelWeights& weights_;
  ThreadPool* pool_;
  kv::PagePool* kv_;
  Communicator* comm_ = nullptr;
  mutable int64_t routed_pairs_ = 0;  // Layer is const; one step at a time
  Rope rope_;
  std::vector<MlaAttention> attention_;  // one per layer
};

}  // namespace tandem::engine::model
