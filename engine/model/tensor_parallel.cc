#include "engine/model/tensor_parallel.h"

#include <string>
#include <utility>

namespace tandem::engine::model {
namespace {

FloatBuffer Copy(const FloatBuffer& b) {
  return b.size() == 0 ? FloatBuffer() : FloatBuffer(b.data(), b.size());
}

StatusOr<PackedWeight> Copy(const PackedWeight& w) {
  if (w.rows() == 0) return PackedWeight();
  return w.Slice(0, w.rows(), 0, w.cols());
}

// Rows [part·rows/tp, (part+1)·rows/tp) of w in units of `unit` rows (a head's rows).
StatusOr<PackedWeight> RowShard(const PackedWeight& w, int64_t units, int rank, int tp,
                                const std::string& name) {
  if (w.rows() == 0) return PackedWeight();
  const int64_t unit = w.rows() / units;
  auto s = w.Slice(unit * units * rank / tp, unit * units * (rank + 1) / tp, 0, w.cols());
  if (!s.ok()) return Status::InvalidArgument(name + ": " + s.status().message());
  return s;
}

StatusOr<PackedWeight> ColShard(const PackedWeight& w, int64_t units, int rank, int tp,
                                const std::string& name) {
  if (w.rows() == 0) return PackedWeight();
  const int64_t unit = w.cols() / units;
  auto s = w.Slice(0, w.rows(), unit * units * rank / tp, unit * units * (rank + 1) / tp);
  if (!s.ok()) return Status::InvalidArgument(name + ": " + s.status().message());
  return s;
}

// gate / up rows and down columns [r·I/tp, (r+1)·I/tp) of a SwiGLU MLP.
StatusOr<MlpWeights> ShardMlp(const MlpWeights& m, int rank, int tp, const std::string& name) {
  MlpWeights out;
  if (m.gate_proj.rows() == 0) return out;
  const int64_t inter = m.gate_proj.rows();
  if (inter % tp != 0) {
    return Status::InvalidArgument(name + ": intermediate size " + std::to_string(inter) +
                                   " does not divide over " + std::to_string(tp) + " ranks");
  }
  ASSIGN_OR_RETURN(out.gate_proj, RowShard(m.gate_proj, tp, rank, tp, name + ".gate_proj"));
  ASSIGN_OR_RETURN(out.up_proj, RowShard(m.up_proj, tp, rank, tp, name + ".up_proj"));
  ASSIGN_OR_RETURN(out.down_proj, ColShard(m.down_proj, tp, rank, tp, name + ".down_proj"));
  return out;
}

StatusOr<MlpWeights> CopyMlp(const MlpWeights& m) {
  MlpWeights out;
  ASSIGN_OR_RETURN(out.gate_proj, Copy(m.gate_proj));
  ASSIGN_OR_RETURN(out.up_proj, Copy(m.up_proj));
  ASSIGN_OR_RETURN(out.down_proj, Copy(m.down_proj));
  return out;
}

}  // namespace

StatusOr<ModelWeights> ShardWeights(const ModelWeights& full, int rank, int tp) {
  const ModelConfig& c = full.config;
  if (tp < 1 || rank < 0 || rank >= tp)
    return Status::InvalidArgument("rank " + std::to_string(rank) + " of " + std::to_string(tp));
  if (c.num_attention_heads % tp != 0) {
    return Status::InvalidArgument(std::to_string(c.num_attention_heads) +
                                   " attention heads do not divide over " + std::to_string(tp) + " ranks");
  }
  const int64_t heads = c.num_attention_heads;
  ModelWeights w;
  w.config = c;
  w.config.num_attention_heads = heads / tp;
  w.embed_tokens = Copy(full.embed_tokens);
  w.norm = Copy(full.norm);
  ASSIGN_OR_RETURN(w.lm_head, Copy(full.lm_head));
  w.lm_head_tied = full.lm_head_tied;
  const int64_t e0 = c.n_routed_experts * rank / tp, e1 = c.n_routed_experts * (rank + 1) / tp;
  for (size_t l = 0; l < full.layers.size(); ++l) {
    const LayerWeights& f = full.layers[l];
    const std::string at = "layer " + std::to_string(l);
    LayerWeights& o = w.layers.emplace_back();
    o.input_layernorm = Copy(f.input_layernorm);
    o.post_attention_layernorm = Copy(f.post_attention_layernorm);
    // Attention: the rank's heads.
    ASSIGN_OR_RETURN(o.attn.q_proj, RowShard(f.attn.q_proj, heads, rank, tp, at + " q_proj"));
    ASSIGN_OR_RETURN(o.attn.q_a_proj, Copy(f.attn.q_a_proj));
    o.attn.q_a_layernorm = Copy(f.attn.q_a_layernorm);
    ASSIGN_OR_RETURN(o.attn.q_b_proj, RowShard(f.attn.q_b_proj, heads, rank, tp, at + " q_b_proj"));
    ASSIGN_OR_RETURN(o.attn.kv_a_proj_with_mqa, Copy(f.attn.kv_a_proj_with_mqa));
    o.attn.kv_a_layernorm = Copy(f.attn.kv_a_layernorm);
    ASSIGN_OR_RETURN(o.attn.kv_b_proj, RowShard(f.attn.kv_b_proj, heads, rank, tp, at + " kv_b_proj"));
    ASSIGN_OR_RETURN(o.attn.o_proj, ColShard(f.attn.o_proj, heads, rank, tp, at + " o_proj"));
    if (f.indexer.has_value()) {  // replicated: every rank makes the same choice
      DsaIndexerWeights& ix = o.indexer.emplace();
      ASSIGN_OR_RETURN(ix.wq_b, Copy(f.indexer->wq_b));
      ASSIGN_OR_RETURN(ix.wk, Copy(f.indexer->wk));
      ix.k_norm_weight = Copy(f.indexer->k_norm_weight);
      ix.k_norm_bias = Copy(f.indexer->k_norm_bias);
      ASSIGN_OR_RETURN(ix.weights_proj, Copy(f.indexer->weights_proj));
    }
    o.is_moe = f.is_moe;
    if (!f.is_moe) {
      ASSIGN_OR_RETURN(o.dense_mlp, ShardMlp(f.dense_mlp, rank, tp, at + " mlp"));
      continue;
    }
    o.moe.router = Copy(f.moe.router);
    o.moe.e_score_correction_bias = Copy(f.moe.e_score_correction_bias);
    ASSIGN_OR_RETURN(o.moe.shared_experts, ShardMlp(f.moe.shared_experts, rank, tp, at + " shared_experts"));
    o.moe.experts.resize(f.moe.experts.size());  // the other ranks' experts stay absent
    for (int64_t e = e0; e < e1; ++e) {
      ASSIGN_OR_RETURN(o.moe.experts[e], CopyMlp(f.moe.experts[e]));
    }
  }
  return w;
}

StatusOr<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::Create(const ModelWeights& full, int tp,
                                                                             int threads_per_rank,
                                                                             kv::PagePool* kv) {
  if (tp < 1 || tp > 64)
    return Status::InvalidArgument("tensor_parallel " + std::to_string(tp) + " outside 1..64");
  std::unique_ptr<TensorParallelRunner> t(new TensorParallelRunner());
  t->config_ = full.config;
  t->kv_ = kv;
  t->group_ = std::make_unique<CpuRankGroup>(tp);
  for (int r = 0; r < tp; ++r) {
    auto rank = std::make_unique<Rank>();
    ASSIGN_OR_RETURN(rank->weights, ShardWeights(full, r, tp));
    rank->pool = std::make_unique<ThreadPool>(std::max(threads_per_rank, 1));
    ASSIGN_OR_RETURN(rank->runner, ModelRunner::Create(rank->weights, rank->pool.get(), kv));
    rank->runner->SetCommunicator(t->group_->Rank(r));
    t->ranks_.push_back(std::move(rank));
  }
  for (int r = 1; r < tp; ++r) t->workers_.emplace_back([raw = t.get(), r] { raw->WorkerLoop(r); });
  return t;
}

TensorParallelRunner::~TensorParallelRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void TensorParallelRunner::WorkerLoop(int rank) {
  uint64_t seen = 0;
  for (;;) {
    std::function<void(int)> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    job(rank);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
    }
    cv_.notify_all();
  }
}

int64_t TensorParallelRunner::PagesNeeded(const KvSequence& seq, int64_t new_tokens) const {
  return ranks_[0]->runner->PagesNeeded(seq, new_tokens);
}

size_t TensorParallelRunner::num_pages() const { return kv_->num_pages(); }

Status TensorParallelRunner::Forward(std::span<const StepInput> batch, const ForwardOptions& options,
                                     std::vector<float>* logits) {
  const int tp = this->tp();
  // Each rank advances its own copy of the sequences.
  std::vector<std::vector<KvSequence>> seqs(tp);
  std::vector<std::vector<StepInput>> inputs(tp);
  for (int r = 0; r < tp; ++r) {
    seqs[r].reserve(batch.size());
    for (const StepInput& in : batch) {
      seqs[r].push_back(in.seq != nullptr ? *in.seq : KvSequence());
      inputs[r].push_back({in.seq != nullptr ? &seqs[r].back() : nullptr, in.tokens});
    }
  }
  std::vector<Status> status(tp, Status::Ok());
  std::vector<std::vector<float>> rank_logits(tp);
  auto run = [&](int r) { status[r] = ranks_[r]->runner->Forward(inputs[r], options, &rank_logits[r]); };
  if (tp > 1) {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = run;
    pending_ = tp - 1;
    ++generation_;
  }
  cv_.notify_all();
  run(0);
  if (tp > 1) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0; });
  }
  for (const Status& st : status) RETURN_IF_ERROR(st);
  *logits = std::move(rank_logits[0]);
  for (size_t i = 0; i < batch.size(); ++i) batch[i].seq->num_tokens = seqs[0][i].num_tokens;
  return Status::Ok();
}

std::vector<int64_t> TensorParallelRunner::RoutedTokensPerRank() const {
  std::vector<int64_t> out;
  for (const auto& r : ranks_) out.push_back(r->runner->routed_pairs());
  return out;
}

}  // namespace tandem::engine::model
