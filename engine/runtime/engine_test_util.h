#pragma once
// Test helpers: an Engine over the HashExecutor and a tiny real KV PagePool, and a solo run of one
// request on a fresh engine (the reference the batched runs must match token for token).

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kv/page_pool.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/hash_executor.h"
#include "engine/runtime/serving_engine.h"

namespace tandem::engine::runtime {

inline constexpr int64_t kHashVocab = 64;

// A BF16 pool of `pages` pages, rows of 4 bytes (one layer, 2 values): what HashExecutor needs.
inline std::unique_ptr<kv::PagePool> MakeHashPool(size_t pages, size_t page_tokens) {
  kv::PagePoolConfig pc;
  pc.shape = {1, 2, 0};
  pc.page_tokens = page_tokens;
  pc.budget_bytes = pages * page_tokens * 4;
  return kv::PagePool::Create(pc).value();
}

struct HashEngine {
  // `config.executor` is replaced by this harness's executor.
  HashEngine(size_t pages, size_t page_tokens, EngineConfig config,
             std::optional<int32_t> poison = std::nullopt)
      : pool(MakeHashPool(pages, page_tokens)), executor(pool.get(), kHashVocab) {
    executor.InjectPoisonToken(poison);
    config.executor = &executor;
    engine = Engine::Create(config).value();
  }
  std::unique_ptr<kv::PagePool> pool;
  HashExecutor executor;
  std::unique_ptr<Engine> engine;
};

struct RunResult {
  std::vector<int32_t> tokens;
  std::optional<FinishReason> finish;
  std::string detail;
  int finishes = 0;
  int64_t cached_prompt_tokens = 0;  // what the first token's output reported
};

// Steps `engine` until request `id` finishes (or max_steps pass), collecting its outputs.
inline RunResult RunUntilFinished(Engine& engine, RequestId id, int max_steps = 100000) {
  RunResult r;
  for (int s = 0; s < max_steps && !r.finish; ++s) {
    for (const RequestOutput& out : engine.Step()) {
      if (out.id != id) continue;
      if (r.tokens.empty() && !out.new_tokens.empty()) r.cached_prompt_tokens = out.cached_prompt_tokens;
      r.tokens.insert(r.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finish) {
        r.finish = out.finish;
        r.detail = out.finish_detail;
        ++r.finishes;
      }
    }
  }
  return r;
}

// `request` alone on a fresh HashEngine built like the batched one.
inline RunResult SoloRun(size_t pages, size_t page_tokens, const EngineConfig& config,
                         std::optional<int32_t> poison, Request request) {
  HashEngine solo(pages, page_tokens, config, poison);
  request.id = 0;
  StatusOr<RequestId> id = solo.engine->Submit(request);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  if (!id.ok()) return {};
  return RunUntilFinished(*solo.engine, *id);
}

// The greedy tokens the HashExecutor's model gives `prompt`, computed from the token list alone
// (no engine, no KV cache): the ground truth any correct scheduling must reproduce.
inline std::vector<int32_t> HashGreedyReference(std::vector<int32_t> context, size_t n) {
  std::vector<int32_t> out;
  std::vector<float> row(kHashVocab);
  for (size_t i = 0; i < n; ++i) {
    HashExecutor::ContextLogits(context, kHashVocab, row.data());
    const int32_t best = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(best);
    context.push_back(best);
  }
  return out;
}

// An engine over a dummy preset's model, opened through the front door with the knobs of `config`
// (role, integrity, prefix cache, scheduler) and exactly `pages` KV pages.
struct DummyEngine {
  DummyEngine(const char* preset, uint64_t seed, size_t pages, size_t page_tokens, const EngineConfig& config,
              KvCacheDtype kv = KvCacheDtype::kBf16, std::vector<float> fp8_scales = {},
              int tensor_parallel = 1) {
    ServingConfig sc;
    sc.tensor_parallel = tensor_parallel;
    sc.dummy_preset = preset;
    sc.dummy_seed = seed;
    sc.kv_dtype = kv;
    sc.kv_fp8_layer_scales = std::move(fp8_scales);
    sc.kv_tokens = pages * page_tokens;
    sc.page_tokens = page_tokens;
    sc.threads = 1;
    sc.role = config.role;
    sc.integrity = config.integrity;
    sc.prefix_cache = config.prefix_cache;
    sc.scheduler = config.scheduler;
    serving = ServingEngine::Open(sc).value();
    pool = &serving->kv_pool();
    engine = &serving->engine();
    EXPECT_EQ(pool->num_pages(), pages);
  }
  std::unique_ptr<ServingEngine> serving;
  kv::PagePool* pool = nullptr;
  Engine* engine = nullptr;
};

// The transfer as the agent runs it, in one process: every page of `exported` converted and
// written into `decode`'s reservation `r` with its tag, then committed with the sender's digest.
inline Status SendPages(Engine& decode, const ImportReservation& r, KvExport& exported) {
  std::vector<uint8_t> page(r.layout.page_bytes);
  for (uint32_t p = 0; p < exported.num_pages(); ++p) {
    RETURN_IF_ERROR(exported.NextPage(page));
    RETURN_IF_ERROR(decode.WritePage(r.transfer_id, p, page, r.page_tags[p]));
  }
  return decode.CommitImport(r.transfer_id, exported.first_token(), exported.digest());
}

inline Request GreedyRequest(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

}  // namespace tandem::engine::runtime
