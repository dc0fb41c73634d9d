#pragma once
// HashExecutor: a deterministic stand-in for the model, cheap enough for 10^5-step scheduler
// property tests, that still depends on the KV cache being right. Forward writes each new token id
// into its KV slot of the real PagePool (layer 0, the first 4 bytes of the token's row), then reads
// back every token of the sequence from its pages and derives the next-token logits from a hash of
// (position, token) over the whole context. A page handed to the wrong sequence, freed under it,
// or skipped changes the logits, so greedy outputs differ from a solo run.
//
// It also injects faults for tests: a poisoned token id makes Forward fail for any batch holding it.

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/runtime/model_executor.h"

namespace tandem::engine::runtime {

class HashExecutor final : public ModelExecutor {
 public:
  // REQUIRES: kv outlives the executor; vocab_size >= 2; the pool's rows are >= 4 bytes
  // (e.g. KvShape{1, 2, 0} in BF16: exactly 4).
  HashExecutor(kv::PagePool* kv, int64_t vocab_size) : kv_(kv), vocab_size_(vocab_size) {}

  int64_t vocab_size() const override { return vocab_size_; }
  kv::PagePool* kv_pool() const override { return kv_; }
  // InvalidArgument for an empty batch or input, a null or repeated sequence, a token outside the
  // vocabulary or the poisoned token; FailedPrecondition for missing pages or a page outside the
  // pool. Nothing is written on error.
  Status Forward(std::span<const ExecInput> batch, std::vector<float>* logits) override;

  // The logits the executor returns after `context` (a whole sequence, read back from its pages):
  // a pure function of the tokens, so tests can compute the expected greedy output without any KV
  // cache. row: [vocab_size] fp32.
  static void ContextLogits(std::span<const int32_t> context, int64_t vocab_size, float* row);

  // Forward fails (InvalidArgument) for every batch that contains `token`.
  void InjectPoisonToken(std::optional<int32_t> token) { poison_ = token; }

  // Test hook: with a log set, every successful Forward appends one record per page a sequence
  // read (in logical order), so a test can check whose KV each sequence read. nullptr: none.
  struct PageRead {
    const model::KvSequence* seq;
    kv::PageId page;
  };
  void RecordReads(std::vector<PageRead>* log) { read_log_ = log; }
  uint64_t forward_calls() const { return forward_calls_; }

 private:
  Status Validate(std::span<const ExecInput> batch) const;

  kv::PagePool* kv_;
  int64_t vocab_size_;
  std::optional<int32_t> poison_;
  uint64_t forward_calls_ = 0;
  std::vector<PageRead>* read_log_ = nullptr;
};

}  // namespace tandem::engine::runtime
