// The Engine over the real forward pass (ModelRunner, `tiny` preset, BF16 KV): greedy outputs with
// batching, chunked prefill and preemption equal each request's solo run on a fresh engine, and
// prefill-only export -> decode-only import continues with the unified engine's tokens.

#include <map>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "engine/core/thread_pool.h"
#include "engine/model/dummy_model.h"
#include "engine/model/forward.h"
#include "engine/model/presets.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/engine_test_util.h"
#include "engine/runtime/model_runner_executor.h"

namespace tandem::engine::runtime {
namespace {

const model::ModelWeights& TinyWeights() {
  static const model::ModelWeights* weights = new model::ModelWeights(
      model::MakeDummyModel(model::Preset("tiny").value(), WeightFormat::kBf16, /*seed=*/11, /*threads=*/2)
          .value());
  return *weights;
}

// A fresh engine over the tiny model: its own page pool, runner and executor.
struct TinyEngine {
  TinyEngine(size_t pages, size_t page_tokens, EngineConfig config) : threads(1) {
    const model::ModelConfig& c = TinyWeights().config;
    kv::PagePoolConfig pc;
    pc.shape = {static_cast<size_t>(c.num_hidden_layers), static_cast<size_t>(c.kv_lora_rank),
                static_cast<size_t>(c.qk_rope_head_dim)};
    pc.page_tokens = page_tokens;
    pc.budget_bytes = 1;
    pc.budget_bytes = pages * kv::ComputePoolGeometry([&] {
                                auto p = pc;
                                p.budget_bytes = 1 << 24;
                                return p;
                              }())
                                  .value()
                                  .page_bytes;
    pool = kv::PagePool::Create(pc).value();
    runner = model::ModelRunner::Create(TinyWeights(), &threads, pool.get()).value();
    executor = std::make_unique<ModelRunnerExecutor>(runner.get(), pool.get());
    config.executor = executor.get();
    engine = Engine::Create(config).value();
  }
  ThreadPool threads;
  std::unique_ptr<kv::PagePool> pool;
  std::unique_ptr<model::ModelRunner> runner;
  std::unique_ptr<ModelRunnerExecutor> executor;
  std::unique_ptr<Engine> engine;
};

std::vector<int32_t> RandomPrompt(std::mt19937& rng, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % 1024);
  return p;
}

RunResult SoloTiny(const Request& r) {
  TinyEngine solo(/*pages=*/64, /*page_tokens=*/4, {});  // room for anything here, one prefill chunk
  return RunUntilFinished(*solo.engine, solo.engine->Submit(r).value());
}

TEST(EngineModelTest, GreedyBatchedChunkedPreemptedEqualsSolo) {
  EngineConfig config;
  config.scheduler.max_batch_tokens = 12;  // prompts up to 30 tokens: chunked
  config.scheduler.max_running_requests = 4;
  config.integrity = true;
  TinyEngine batched(/*pages=*/16, /*page_tokens=*/4, config);  // 64 tokens for up to 4 requests: preemption
  std::mt19937 rng(5);
  std::map<RequestId, Request> reqs;
  std::map<RequestId, RunResult> runs;
  int step = 0;
  for (; step < 600; ++step) {
    if (step % 3 == 0 && reqs.size() < 48) {
      Request r = GreedyRequest(RandomPrompt(rng, 3 + static_cast<int>(rng() % 28)),
                                6 + static_cast<int32_t>(rng() % 10));
      reqs[batched.engine->Submit(r).value()] = r;
    }
    for (const RequestOutput& out : batched.engine->Step()) {
      RunResult& run = runs[out.id];
      run.tokens.insert(run.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finish) {
        run.finish = out.finish;
        ++run.finishes;
      }
    }
    if (reqs.size() == 48 && batched.engine->scheduler().num_live() == 0) break;
  }
  const EngineStats stats = batched.engine->Stats();
  std::printf("tiny model: %d steps, %llu preemptions, %llu tokens computed for %llu generated\n", step,
              static_cast<unsigned long long>(stats.preemptions),
              static_cast<unsigned long long>(stats.computed_tokens),
              static_cast<unsigned long long>(stats.generation_tokens));
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_EQ(stats.pages_held, 0u);
  ASSERT_EQ(runs.size(), 48u);
  for (const auto& [id, r] : reqs) {
    EXPECT_EQ(runs[id].finishes, 1) << id;
    EXPECT_EQ(runs[id].finish, FinishReason::kLength) << id;
    EXPECT_EQ(runs[id].tokens, SoloTiny(r).tokens) << "request " << id;
  }
}

TEST(EngineModelTest, PrefillExportDecodeImportMatchesUnified) {
  std::mt19937 rng(9);
  const Request req = GreedyRequest(RandomPrompt(rng, 13), 8);
  const RunResult unified = SoloTiny(req);
  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  TinyEngine prefill(16, 4, pconf);
  const RequestId pid = prefill.engine->Submit(req).value();
  ASSERT_EQ(prefill.engine->Step().size(), 1u);
  const KvPayload payload = prefill.engine->ExportKv(pid).value();
  EXPECT_EQ(payload.first_token, unified.tokens[0]);
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  dconf.integrity = true;
  TinyEngine decode(24, 4, dconf);
  const RequestId did = decode.engine->ImportKv(req, payload).value();
  const RunResult rest = RunUntilFinished(*decode.engine, did);
  std::vector<int32_t> joined{payload.first_token};
  joined.insert(joined.end(), rest.tokens.begin(), rest.tokens.end());
  EXPECT_EQ(joined, unified.tokens);
  ASSERT_TRUE(prefill.engine->ReleaseExported(pid).ok());
  EXPECT_EQ(prefill.engine->Stats().pages_held, 0u);
}

}  // namespace
}  // namespace tandem::engine::runtime
