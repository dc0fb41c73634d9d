// The Engine over the real forward pass (ModelRunner, `tiny` preset, BF16 KV): greedy outputs with
// batching, chunked prefill and preemption equal each request's solo run on a fresh engine, and
// prefill-only export -> decode-only import continues with the unified engine's tokens.

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "engine/runtime/engine.h"
#include "engine/runtime/engine_test_util.h"
#include "engine/runtime/serving_engine.h"

namespace tandem::engine::runtime {
namespace {

// A fresh engine over tiny (seed 11): its own model, pool, runner and Engine.
struct TinyEngine : DummyEngine {
  TinyEngine(size_t pages, size_t page_tokens, const EngineConfig& config,
             KvCacheDtype kv = KvCacheDtype::kBf16, std::vector<float> fp8_scales = {},
             int tensor_parallel = 1)
      : DummyEngine("tiny", 11, pages, page_tokens, config, kv, std::move(fp8_scales), tensor_parallel) {}
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
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  dconf.integrity = true;
  TinyEngine decode(24, 4, dconf);
  const ImportReservation r = decode.engine->ReserveImport(req).value();
  std::shared_ptr<KvExport> exported = prefill.engine->ExportKv(pid, r.layout).value();
  EXPECT_EQ(exported->first_token(), unified.tokens[0]);
  ASSERT_TRUE(SendPages(*decode.engine, r, *exported).ok());
  ASSERT_TRUE(prefill.engine->FinishExport(pid, kv::TransferState::kDone).ok());
  const RunResult rest = RunUntilFinished(*decode.engine, r.id);
  std::vector<int32_t> joined{exported->first_token()};
  joined.insert(joined.end(), rest.tokens.begin(), rest.tokens.end());
  EXPECT_EQ(joined, unified.tokens);
  prefill.engine->Step();
  EXPECT_EQ(prefill.engine->Stats().pages_held, 0u);
  EXPECT_EQ(prefill.engine->Stats().exported, 1u);
}

struct TokensAndLogprobs {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

// Steps `engine` until `id` finishes, appending to `got` (which may hold the prefill side's part).
void Collect(Engine& engine, RequestId id, TokensAndLogprobs* got) {
  for (int s = 0; s < 1000; ++s) {
    for (const RequestOutput& out : engine.Step()) {
      if (out.id != id) continue;
      got->tokens.insert(got->tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      got->logprobs.insert(got->logprobs.end(), out.new_token_logprobs.begin(), out.new_token_logprobs.end());
      if (out.finish) return;
    }
  }
  ADD_FAILURE() << "request " << id << " never finished";
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// The production split: a BF16-KV prefill engine sends its pages converted to the decode pool's
// FP8 e4m3 (with the scales the decode engine fixed at Open); the decode side continues with the
// tokens of a unified FP8-KV engine using those scales, its logprobs no further from that engine's
// than the unified BF16-KV engine's are (the FP8 cache's own effect), and the wire carries half the
// bytes of a BF16 page. (Measured over the 8 tokens, where BF16 and FP8 agree: split vs FP8 0.044 in
// logprob, BF16 vs FP8 0.071. The prompt's seed changed from 10 when FP8 pages began to be read as
// code · scale in fp32 instead of rounded to bf16 first: seed 10's first token sat on a near-tie
// of these random weights' flat logits and flipped.)
TEST(EngineModelTest, Bf16PrefillToFp8DecodeMatchesUnifiedWithinFp8Effect) {
  std::mt19937 rng(4);
  Request req = GreedyRequest(RandomPrompt(rng, 19), 8);
  req.params.logprobs = 0;
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  TinyEngine decode(24, 4, dconf, KvCacheDtype::kFp8E4M3);
  const ImportReservation r = decode.engine->ReserveImport(req).value();
  ASSERT_EQ(r.layout.dtype, KvCacheDtype::kFp8E4M3);

  TinyEngine unified_fp8(24, 4, {}, KvCacheDtype::kFp8E4M3, r.layout.fp8_layer_scales);
  TokensAndLogprobs fp8;
  Collect(*unified_fp8.engine, unified_fp8.engine->Submit(req).value(), &fp8);
  TinyEngine unified_bf16(24, 4, {});
  TokensAndLogprobs bf16;
  Collect(*unified_bf16.engine, unified_bf16.engine->Submit(req).value(), &bf16);
  ASSERT_EQ(fp8.tokens.size(), 8u);
  // Random weights give flat logits, so the two caches may pick other tokens after a while;
  // compare where they agree (the first `agree` tokens), where a flip would exceed FP8's effect.
  size_t agree = 0;
  while (agree < fp8.tokens.size() && bf16.tokens[agree] == fp8.tokens[agree]) ++agree;
  ASSERT_GE(agree, 4u);
  auto first_n = [&](TokensAndLogprobs t) {
    t.tokens.resize(std::min(t.tokens.size(), agree));
    t.logprobs.resize(std::min(t.logprobs.size(), agree));
    return t;
  };
  fp8 = first_n(fp8);
  bf16 = first_n(bf16);

  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  TinyEngine prefill(24, 4, pconf);  // BF16 KV
  const RequestId pid = prefill.engine->Submit(req).value();
  const std::vector<RequestOutput> first = prefill.engine->Step();
  ASSERT_EQ(first.size(), 1u);
  TokensAndLogprobs split{first[0].new_tokens, first[0].new_token_logprobs};
  std::shared_ptr<KvExport> exported = prefill.engine->ExportKv(pid, r.layout).value();
  ASSERT_TRUE(SendPages(*decode.engine, r, *exported).ok());
  EXPECT_EQ(2 * r.layout.page_bytes, prefill.serving->kv_pool().geometry().page_bytes);
  Collect(*decode.engine, r.id, &split);
  split = first_n(split);
  EXPECT_EQ(split.tokens, fp8.tokens);
  const float fp8_effect = MaxAbsDiff(bf16.logprobs, fp8.logprobs);
  EXPECT_GT(fp8_effect, 0.0f);
  EXPECT_LE(MaxAbsDiff(split.logprobs, fp8.logprobs), fp8_effect)
      << "split vs unified FP8; unified BF16 vs FP8 differ by " << fp8_effect;
}

// ServingConfig::tensor_parallel: the engine over 2 and 4 CPU ranks (tiny's 4 heads split, its
// experts spread) serves a batch of greedy requests with the unsharded engine's tokens, logprobs
// within fp32 reordering, both KV dtypes; and a tensor-parallel BF16 prefill engine hands its pages
// to a tensor-parallel FP8 decode engine as the unsharded ones do.
TEST(EngineModelTest, TensorParallelEnginesServeTheUnshardedTokens) {
  std::mt19937 rng(4);
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(GreedyRequest(RandomPrompt(rng, 9 + 5 * i), 6));
  for (Request& r : reqs) r.params.logprobs = 0;
  for (KvCacheDtype dtype : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
    std::vector<TokensAndLogprobs> want(reqs.size());
    for (int tp : {1, 2, 4}) {
      TinyEngine e(64, 4, {}, dtype, {}, tp);
      std::vector<RequestId> ids;
      for (const Request& r : reqs) ids.push_back(e.engine->Submit(r).value());
      std::vector<TokensAndLogprobs> got(reqs.size());
      size_t finished = 0;
      for (int step = 0; step < 1000 && finished < ids.size(); ++step) {
        for (const RequestOutput& out : e.engine->Step()) {
          const size_t i = static_cast<size_t>(std::find(ids.begin(), ids.end(), out.id) - ids.begin());
          ASSERT_LT(i, ids.size());
          got[i].tokens.insert(got[i].tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
          got[i].logprobs.insert(got[i].logprobs.end(), out.new_token_logprobs.begin(),
                                 out.new_token_logprobs.end());
          finished += out.finish ? 1 : 0;
        }
      }
      ASSERT_EQ(finished, ids.size());
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (tp == 1) {
          want[i] = got[i];
          continue;
        }
        EXPECT_EQ(got[i].tokens, want[i].tokens) << "tp " << tp << " request " << i;
        // fp32 sums reordered over the ranks; through an FP8 cache a latent value a hair from an
        // e4m3 rounding boundary can round the other way (measured up to 1.1e-4).
        EXPECT_LE(MaxAbsDiff(got[i].logprobs, want[i].logprobs), 1e-3f) << "tp " << tp;
      }
      EXPECT_EQ(e.engine->Stats().pages_held, 0u);
    }
  }
  // P/D: BF16-KV prefill at tp 2 -> FP8-KV decode at tp 2, against the same split at tp 1.
  std::vector<std::vector<int32_t>> split_tokens;
  for (int tp : {1, 2}) {
    EngineConfig dconf;
    dconf.role = EngineRole::kDecodeOnly;
    TinyEngine decode(24, 4, dconf, KvCacheDtype::kFp8E4M3, {}, tp);
    const ImportReservation r = decode.engine->ReserveImport(reqs[1]).value();
    EngineConfig pconf;
    pconf.role = EngineRole::kPrefillOnly;
    TinyEngine prefill(24, 4, pconf, KvCacheDtype::kBf16, {}, tp);
    const RequestId pid = prefill.engine->Submit(reqs[1]).value();
    const std::vector<RequestOutput> first = prefill.engine->Step();
    ASSERT_EQ(first.size(), 1u);
    TokensAndLogprobs split{first[0].new_tokens, {}};
    std::shared_ptr<KvExport> exported = prefill.engine->ExportKv(pid, r.layout).value();
    ASSERT_TRUE(SendPages(*decode.engine, r, *exported).ok());
    Collect(*decode.engine, r.id, &split);
    split_tokens.push_back(split.tokens);
  }
  EXPECT_EQ(split_tokens[1], split_tokens[0]);
  EXPECT_EQ(split_tokens[0].size(), 6u);
}

}  // namespace
}  // namespace tandem::engine::runtime
