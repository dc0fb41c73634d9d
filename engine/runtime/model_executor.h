#pragma once
// The scheduler's view of the forward pass: what a step needs from a model, nothing more. The
// Engine drives a ModelExecutor; ModelRunnerExecutor adapts the CPU ModelRunner, and tests use a
// cheap deterministic fake that still reads and writes the real KV PagePool
// (engine/runtime/fake_executor.h), so scheduler bugs that mix up pages change the output.

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward_types.h"

namespace tandem::engine::runtime {

// One sequence's part of a step: its KV state and the tokens it adds (>= 1).
struct ExecInput {
  model::KvSequence* seq = nullptr;
  std::span<const int32_t> tokens;
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  // Token ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // The KV page pool the executor reads and writes (not owned by the executor's caller; the
  // engine allocates its pages).
  virtual kv::PagePool* kv_pool() const = 0;
  int64_t page_tokens() const { return static_cast<int64_t>(kv_pool()->page_tokens()); }

  // Pages `seq` must hold before a step adding `new_tokens` tokens.
  int64_t PagesNeeded(const model::KvSequence& seq, int64_t new_tokens) const {
    const int64_t p = page_tokens();
    return (seq.num_tokens + new_tokens + p - 1) / p;
  }

  // Runs one step: appends each input's tokens to its sequence (KV rows, num_tokens) and writes
  // `logits` as [batch.size(), vocab_size()] fp32, the logits after each input's last token, in
  // input order. On error the caller treats every sequence of the batch as unknown-state for the
  // tokens of this step (the Engine restores num_tokens and retries or aborts): page slots past
  // num_tokens are don't-care, so num_tokens is all there is to restore.
  virtual Status Forward(std::span<const ExecInput> batch, std::vector<float>* logits) = 0;
};

}  // namespace tandem::engine::runtime
