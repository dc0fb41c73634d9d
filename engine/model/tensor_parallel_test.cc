// Tensor and expert parallelism on CPU ranks (issue 21 item 2): the collectives, weight shards,
// and sharded logits against the unsharded model for tp 1, 2, 4, 8, both architectures, every
// weight format and both KV dtypes.
#include "engine/model/tensor_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/dummy_model.h"
#include "engine/model/kv_shape.h"
#include "engine/model/presets.h"

namespace tandem::engine::model {
namespace {

// fp32 sums in another order (partial o_proj and MLP outputs summed over ranks) against the
// unsharded model's, over 2 layers and lm_head (measured worst: printed as [tp-nmse]).
constexpr double kNmseTensorParallel = 1e-8;

template <typename Fn>
void OnRanks(CpuRankGroup& g, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < g.size(); ++r) threads.emplace_back([&, r] { fn(g.Rank(r), r); });
  for (std::thread& t : threads) t.join();
}

TEST(CommunicatorTest, CollectivesGiveEveryRankTheSameResult) {
  for (int size : {1, 2, 3, 4, 8}) {
    CpuRankGroup g(size);
    const int64_t n = 37;
    std::vector<std::vector<float>> reduced(size), gathered(size), scattered(size), exchanged(size);
    OnRanks(g, [&](Communicator* c, int r) {
      ASSERT_EQ(c->rank(), r);
      ASSERT_EQ(c->size(), size);
      std::vector<float> mine(n);
      for (int64_t i = 0; i < n; ++i) mine[i] = 0.1f * static_cast<float>(r + 1) + static_cast<float>(i);
      reduced[r] = mine;
      ASSERT_TRUE(c->AllReduceSum(reduced[r].data(), n).ok());
      gathered[r].resize(size * n);
      ASSERT_TRUE(c->AllGather(mine.data(), n, gathered[r].data()).ok());
      std::vector<float> blocks(size * n);
      for (int64_t i = 0; i < size * n; ++i) blocks[i] = static_cast<float>(r * 1000 + i);
      scattered[r].resize(n);
      ASSERT_TRUE(c->ReduceScatterSum(blocks.data(), n, scattered[r].data()).ok());
      exchanged[r].resize(size * n);
      ASSERT_TRUE(c->AllToAll(blocks.data(), n, exchanged[r].data()).ok());
    });
    for (int r = 0; r < size; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        float want = 0.0f;  // rank order
        for (int k = 0; k < size; ++k) want += 0.1f * static_cast<float>(k + 1) + static_cast<float>(i);
        ASSERT_EQ(reduced[r][i], want) << size << " ranks, rank " << r;
        float rs = 0.0f;
        for (int k = 0; k < size; ++k) rs += static_cast<float>(k * 1000 + r * n + i);
        ASSERT_EQ(scattered[r][i], rs);
        for (int k = 0; k < size; ++k) {
          ASSERT_EQ(gathered[r][k * n + i], 0.1f * static_cast<float>(k + 1) + static_cast<float>(i));
          ASSERT_EQ(exchanged[r][k * n + i], static_cast<float>(k * 1000 + r * n + i));
        }
      }
    }
  }
}

TEST(CommunicatorTest, RanksDisagreeingOnTheSizeAllGetAnError) {
  CpuRankGroup g(3);
  std::vector<Status> st(3, Status::Ok());
  OnRanks(g, [&](Communicator* c, int r) {
    std::vector<float> v(10, 1.0f);
    st[r] = c->AllReduceSum(v.data(), r == 1 ? 9 : 10);
    // The group still works afterwards.
    if (st[r].code() == StatusCode::kInvalidArgument) {
      EXPECT_TRUE(c->AllReduceSum(v.data(), 10).ok());
    }
  });
  for (const Status& s : st) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

// The model the sharded tests run: deepseek_v3 / glm_moe_dsa with Kimi's head dims (nope 128,
// rope 64, v 128), 16 heads, a dense layer and an MoE layer (8 experts top 2, one shared expert),
// intermediate sizes 1024: at tp 8 every shard is 2 heads, one expert and 128 intermediate rows,
// on the fp8 block grid.
ModelConfig ShardableConfig(const char* preset) {
  ModelConfig c = Preset(preset).value();
  c.num_hidden_layers = 2;
  c.first_k_dense_replace = 1;
  c.hidden_size = 256;
  c.num_attention_heads = 16;
  c.q_lora_rank = 128;
  c.kv_lora_rank = 128;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  c.intermediate_size = 1024;
  c.moe_intermediate_size = 1024;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  if (c.has_indexer()) {
    c.indexer.head_dim = 128;  // >= the rope width
    c.indexer.full_layers = std::vector<bool>(2, true);
  }
  return c;
}

std::vector<int32_t> Tokens(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((seed * 131 + i * 37 + i * i * 11) % 1000);
  return t;
}

double Nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return err / norm;
}

kv::PagePoolConfig PoolFor(const ModelConfig& c, KvCacheDtype dtype) {
  kv::PagePoolConfig pc;
  pc.shape = KvShapeFor(c);
  pc.dtype = dtype;
  pc.page_tokens = 4;
  pc.budget_bytes = 1 << 22;
  return pc;
}

class ShardedModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShardedModelTest, ShardedLogitsEqualUnshardedForEveryTpFormatAndKvDtype) {
  const ModelConfig c = ShardableConfig(GetParam());
  for (WeightFormat format : {WeightFormat::kBf16, WeightFormat::kFp8Block128, WeightFormat::kInt4Group32}) {
    const ModelWeights full = MakeDummyModel(c, format, 5).value();
    for (KvCacheDtype dtype : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
      // The unsharded reference: prefill of 21 tokens, then 2 decode steps.
      ThreadPool pool(2);
      auto kv = kv::PagePool::Create(PoolFor(c, dtype)).value();
      auto runner = ModelRunner::Create(full, &pool, kv.get()).value();
      std::vector<std::vector<float>> want;
      {
        KvSequence seq;
        for (const std::vector<int32_t>& step :
             {Tokens(21, 1), std::vector<int32_t>{7}, std::vector<int32_t>{300}}) {
          while (static_cast<int64_t>(seq.pages.size()) <
                 runner->PagesNeeded(seq, static_cast<int64_t>(step.size())))
            seq.pages.push_back(static_cast<kv::PageId>(seq.pages.size()));
          const StepInput in{&seq, step};
          std::vector<float> logits;
          ASSERT_TRUE(runner->Forward({&in, 1}, {}, &logits).ok());
          want.push_back(logits);
        }
      }
      for (int tp : {1, 2, 4, 8}) {
        const std::string where = std::string(GetParam()) + " " + std::string(WeightFormatName(format)) +
                                  " " + std::string(KvCacheDtypeName(dtype)) + " tp " + std::to_string(tp);
        auto tp_kv = kv::PagePool::Create(PoolFor(c, dtype)).value();
        auto sharded = TensorParallelRunner::Create(full, tp, 1, tp_kv.get());
        ASSERT_TRUE(sharded.ok()) << where << ": " << sharded.status().ToString();
        KvSequence seq;
        int step_index = 0;
        double worst = 0;
        for (const std::vector<int32_t>& step :
             {Tokens(21, 1), std::vector<int32_t>{7}, std::vector<int32_t>{300}}) {
          while (static_cast<int64_t>(seq.pages.size()) <
                 (*sharded)->PagesNeeded(seq, static_cast<int64_t>(step.size())))
            seq.pages.push_back(static_cast<kv::PageId>(seq.pages.size()));
          const StepInput in{&seq, step};
          std::vector<float> logits;
          ASSERT_TRUE((*sharded)->Forward({&in, 1}, {}, &logits).ok()) << where;
          ASSERT_EQ(logits.size(), want[step_index].size());
          const double nmse = Nmse(logits, want[step_index]);
          EXPECT_LE(nmse, kNmseTensorParallel) << where << " step " << step_index;
          worst = std::max(worst, nmse);
          if (tp == 1) {
            EXPECT_EQ(logits, want[step_index]) << where << ": one rank is the unsharded model";
          }
          ++step_index;
        }
        EXPECT_EQ(seq.num_tokens, 23);
        std::printf("[tp-nmse] %s: worst logits NMSE vs unsharded %.3g\n", where.c_str(), worst);
        // Expert parallelism: every (token, expert) pair ran on exactly one rank.
        const std::vector<int64_t> per_rank = (*sharded)->RoutedTokensPerRank();
        const int64_t total = std::accumulate(per_rank.begin(), per_rank.end(), int64_t{0});
        EXPECT_EQ(total, 23 * c.num_experts_per_tok) << where;
        if (format == WeightFormat::kBf16 && dtype == KvCacheDtype::kBf16) {
          std::string balance;
          for (int64_t n : per_rank) balance += " " + std::to_string(n);
          std::printf("[ep-balance] %s: routed (token, expert) pairs per rank:%s\n", where.c_str(),
                      balance.c_str());
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ShardedModelTest, ::testing::Values("tiny", "tiny-glm"));

TEST(ShardWeightsTest, ShardsOffTheBlockGridOrUnevenHeadsAreErrors) {
  ModelConfig c = ShardableConfig("tiny");
  const ModelWeights full = MakeDummyModel(c, WeightFormat::kFp8Block128, 5).value();
  EXPECT_EQ(ShardWeights(full, 0, 3).status().code(), StatusCode::kInvalidArgument);   // 16 heads / 3
  EXPECT_EQ(ShardWeights(full, 0, 16).status().code(), StatusCode::kInvalidArgument);  // 1 head: 192 rows
  EXPECT_EQ(ShardWeights(full, 2, 2).status().code(), StatusCode::kInvalidArgument);   // no rank 2
  EXPECT_TRUE(ShardWeights(full, 7, 8).ok());
}

TEST(ShardWeightsTest, SlicesAreTheirRowsAndColumns) {
  // A slice's matmul is the full matmul's rows (row slices) or the partial sum over its columns.
  const ModelConfig c = ShardableConfig("tiny");
  for (WeightFormat format : {WeightFormat::kBf16, WeightFormat::kFp8Block128, WeightFormat::kInt4Group32}) {
    const ModelWeights full = MakeDummyModel(c, format, 9).value();
    const PackedWeight& w = format == WeightFormat::kInt4Group32 ? full.layers[1].moe.experts[0].down_proj
                                                                 : full.layers[0].attn.o_proj;  // [256, 2048]
    ThreadPool pool(1);
    std::vector<float> x(w.cols());
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.3f);
    std::vector<float> y(w.rows());
    ASSERT_TRUE(kernels::cpu::Matmul(w, x.data(), 1, y.data(), &pool).ok());
    const PackedWeight rows = w.Slice(128, 256, 0, w.cols()).value();
    std::vector<float> yr(128);
    ASSERT_TRUE(kernels::cpu::Matmul(rows, x.data(), 1, yr.data(), &pool).ok());
    for (int64_t i = 0; i < 128; ++i) EXPECT_EQ(yr[i], y[128 + i]) << WeightFormatName(format);
    const int64_t half = w.cols() / 2;
    const PackedWeight left = w.Slice(0, w.rows(), 0, half).value(),
                       right = w.Slice(0, w.rows(), half, w.cols()).value();
    std::vector<float> yl(w.rows()), yrt(w.rows());
    ASSERT_TRUE(kernels::cpu::Matmul(left, x.data(), 1, yl.data(), &pool).ok());
    ASSERT_TRUE(kernels::cpu::Matmul(right, x.data() + half, 1, yrt.data(), &pool).ok());
    for (int64_t i = 0; i < w.rows(); ++i)
      EXPECT_NEAR(yl[i] + yrt[i], y[i], 1e-4 * (1 + std::fabs(y[i]))) << WeightFormatName(format);
    const int64_t off = format == WeightFormat::kInt4Group32   ? 16
                        : format == WeightFormat::kFp8Block128 ? 64
                                                               : -1;
    if (off > 0) {
      EXPECT_EQ(w.Slice(0, w.rows(), off, w.cols()).status().code(), StatusCode::kInvalidArgument);
    }
    EXPECT_EQ(w.Slice(0, 0, 0, w.cols()).status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace tandem::engine::model
