#pragma once
// Tensor and expert parallelism (issue 21 item 2), proven on CPU ranks: `tp` ranks, each a
// ModelRunner over its shard of the weights, joined by a Communicator.
//
// The split (as vLLM and SGLang shard DeepSeek-V3 / GLM MoE models at TP8):
//   attention   heads: rank r keeps heads [r·H/tp, (r+1)·H/tp): those rows of q_b_proj (or q_proj)
//               and kv_b_proj, those columns of o_proj (row-parallel: its output is a partial
//               sum, all-reduced). q_a_proj, kv_a_proj, their norms and the DSA indexer are
//               replicated: every rank computes the same latent, q_lora and indexer choice.
//   KV cache    MLA caches one latent row per token, shared by all heads, so it cannot be split by
//               head: every rank needs the whole latent (and GLM's indexer keys), as in
//               production TP where each GPU holds all of it. CPU ranks share one pool: every rank
//               computes the same rows, rank 0 writes them, and the ranks agree before reading,
//               so transfers, the prefix cache and integrity checks see one pool as without TP.
//   MoE         routed experts: rank r keeps experts [r·E/tp, (r+1)·E/tp) (expert parallelism);
//               the router is replicated, so every rank routes every token the same way and runs
//               the tokens routed to its own experts. The shared expert and dense MLPs are split
//               along their intermediate dimension (gate / up rows, down columns). The layer's
//               partial outputs are all-reduced (an all-to-all dispatch would move tokens instead
//               of outputs; at decode batches the all-reduce moves less).
//   the rest    embeddings, final norm and lm_head replicated: every rank ends with the same
//               residual stream and logits.
// Every shard bound must fall on the weight format's blocks (fp8 128 x 128, int4 32 columns).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/status.h"
#include "engine/core/communicator.h"
#include "engine/core/thread_pool.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

// Rank `rank` of `tp`'s weights, copied out of `full` as described above (its config names H/tp
// heads). InvalidArgument when tp does not divide the heads or an intermediate size, or a shard
// bound falls inside a weight's block.
StatusOr<ModelWeights> ShardWeights(const ModelWeights& full, int rank, int tp);

class TensorParallelRunner {
 public:
  // tp ranks (1..64), each with its own ThreadPool of threads_per_rank threads, all over `kv`.
  // Rank 0 runs on the caller's thread, the others on threads of their own.
  // REQUIRES: kv outlives the runner. Errors: ShardWeights', ModelRunner::Create's.
  static StatusOr<std::unique_ptr<TensorParallelRunner>> Create(const ModelWeights& full, int tp,
                                                                int threads_per_rank, kv::PagePool* kv);
  ~TensorParallelRunner();

  int tp() const { return static_cast<int>(ranks_.size()); }
  const ModelConfig& config() const { return config_; }
  int64_t PagesNeeded(const KvSequence& seq, int64_t new_tokens) const;
  size_t num_pages() const;

  // ModelRunner::Forward over the ranks: every rank runs the step on its shard (with its own copy
  // of each sequence), the logits are rank 0's (every rank's are the same bits), and each
  // sequence's num_tokens advances once. Errors as ModelRunner::Forward (every rank checks the
  // batch the same way, so they fail together, before any collective).
  Status Forward(std::span<const StepInput> batch, const ForwardOptions& options, std::vector<float>* logits);

  // Tokens routed to each rank's experts so far (expert-parallel balance), per rank.
  std::vector<int64_t> RoutedTokensPerRank() const;

 private:
  struct Rank {
    ModelWeights weights;
    std::unique_ptr<ThreadPool> pool;
    std::unique_ptr<ModelRunner> runner;
  };
  TensorParallelRunner() = default;
  void WorkerLoop(int rank);

  ModelConfig config_;
  kv::PagePool* kv_ = nullptr;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unique_ptr<CpuRankGroup> group_;
  // Ranks 1.. wait for a step's job (generation_ advances), run it, and count themselves done.
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::function<void(int)> job_;
};

}  // namespace tandem::engine::model
