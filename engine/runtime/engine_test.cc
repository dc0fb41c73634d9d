// Engine API tests over the HashExecutor: validation at Submit, greedy runs, cancellation, stats,
// integrity aborts, Forward failures, roles (prefill-only export -> decode-only import) and the
// deferred release of pages in a transfer.

#include "engine/runtime/engine.h"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "engine/runtime/engine_test_util.h"

namespace tandem::engine::runtime {
namespace {

std::vector<int32_t> Prompt(size_t n, int32_t salt) {
  std::vector<int32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>((salt * 7 + i * 13) % (kHashVocab - 1));
  return p;
}

// Steps until no request is live; returns each request's run.
std::map<RequestId, RunResult> RunAll(Engine& engine, int max_steps = 10000) {
  std::map<RequestId, RunResult> runs;
  for (int s = 0; s < max_steps && engine.scheduler().num_live() > 0; ++s) {
    for (const RequestOutput& out : engine.Step()) {
      RunResult& r = runs[out.id];
      r.tokens.insert(r.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finish) {
        r.finish = out.finish;
        r.detail = out.finish_detail;
        ++r.finishes;
      }
    }
  }
  return runs;
}

TEST(EngineTest, RoleNames) {
  EXPECT_EQ(ParseEngineRole("prefill-only").value(), EngineRole::kPrefillOnly);
  EXPECT_EQ(ParseEngineRole("decode-only").value(), EngineRole::kDecodeOnly);
  EXPECT_EQ(ParseEngineRole("unified").value(), EngineRole::kUnified);
  EXPECT_EQ(ParseEngineRole("both").status().code(), StatusCode::kInvalidArgument);
}

TEST(EngineTest, CreateNeedsAnExecutorAndGoodKnobs) {
  EXPECT_EQ(Engine::Create(EngineConfig{}).status().code(), StatusCode::kInvalidArgument);
  auto pool = MakeHashPool(8, 4);
  HashExecutor exec(pool.get(), kHashVocab);
  EngineConfig config;
  config.executor = &exec;
  config.scheduler.max_batch_tokens = 0;
  EXPECT_EQ(Engine::Create(config).status().code(), StatusCode::kInvalidArgument);
  config.scheduler.max_batch_tokens = 8;
  config.eos_token_ids = {kHashVocab};
  EXPECT_EQ(Engine::Create(config).status().code(), StatusCode::kInvalidArgument);
}

TEST(EngineTest, SubmitValidatesAndRejects) {
  HashEngine h(8, 4, {});
  Engine& e = *h.engine;
  EXPECT_EQ(e.Submit(GreedyRequest({}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Submit(GreedyRequest({1, kHashVocab}, 4)).status().code(), StatusCode::kInvalidArgument);
  Request bad = GreedyRequest({1, 2}, 4);
  bad.params.top_p = 0.0f;
  const Status top_p = e.Submit(bad).status();
  EXPECT_EQ(top_p.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(top_p.message().find("top_p"), std::string::npos) << top_p.message();
  Request stop = GreedyRequest({1, 2}, 4);
  stop.params.stop = {"end"};  // no tokenizer to match stop strings against
  EXPECT_EQ(e.Submit(stop).status().code(), StatusCode::kInvalidArgument);
  // 32 tokens + 1 need 9 pages of 4; the pool has 8.
  const Status never = e.Submit(GreedyRequest(Prompt(32, 1), 4)).status();
  EXPECT_EQ(never.code(), StatusCode::kOutOfRange);
  EXPECT_NE(never.message().find("never run"), std::string::npos) << never.message();
  Request named = GreedyRequest({1, 2}, 4);
  named.id = 42;
  EXPECT_EQ(e.Submit(named).value(), 42u);
  EXPECT_EQ(e.Submit(named).status().code(), StatusCode::kAlreadyExists);
  const EngineStats s = e.Stats();
  EXPECT_EQ(s.finished[static_cast<size_t>(FinishReason::kRejected)], 1u);
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.prompt_tokens, 2u);
}

TEST(EngineTest, GreedyRunEmitsEachTokenOnceAndFreesPages) {
  HashEngine h(16, 4, {});
  Engine& e = *h.engine;
  const RequestId id = e.Submit(GreedyRequest(Prompt(9, 3), 6)).value();
  EngineStats s = e.Stats();
  EXPECT_EQ(s.kv_capacity_tokens, 64u);
  const RunResult r = RunUntilFinished(e, id);
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.finishes, 1);
  EXPECT_TRUE(e.Step().empty());  // nothing after the finish
  s = e.Stats();
  EXPECT_EQ(s.pages_held, 0u);
  EXPECT_EQ(s.kv_used_tokens, 0u);
  EXPECT_EQ(s.generation_tokens, 6u);
  EXPECT_EQ(s.prompt_tokens, 9u);
  EXPECT_EQ(s.computed_tokens, 9u + 5u);  // the prompt, then each token but the last
  EXPECT_EQ(s.finished[static_cast<size_t>(FinishReason::kLength)], 1u);
  EXPECT_EQ(s.steps, 6u);
}

TEST(EngineTest, CancelInEachPhaseFreesPagesAndFinishesOnce) {
  EngineConfig config;
  config.scheduler.max_batch_tokens = 4;
  HashEngine h(32, 4, config);
  Engine& e = *h.engine;
  const RequestId decoding = e.Submit(GreedyRequest(Prompt(2, 1), 30)).value();
  const RequestId prefilling = e.Submit(GreedyRequest(Prompt(20, 2), 30)).value();
  const RequestId waiting = e.Submit(GreedyRequest(Prompt(20, 3), 30)).value();
  e.Step();
  e.Step();
  EngineStats s = e.Stats();
  EXPECT_EQ(s.running, 2u);
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_GT(s.pages_held, 0u);
  for (RequestId id : {waiting, prefilling, decoding}) ASSERT_TRUE(e.Cancel(id).ok());
  EXPECT_EQ(e.Cancel(decoding).code(), StatusCode::kNotFound);
  EXPECT_EQ(e.Stats().pages_held, 0u);  // released at Cancel (no transfer in flight)
  std::map<RequestId, int> finishes;
  for (const RequestOutput& out : e.Step()) {
    EXPECT_EQ(out.finish, FinishReason::kCancelled);
    ++finishes[out.id];
  }
  EXPECT_EQ(finishes, (std::map<RequestId, int>{{decoding, 1}, {prefilling, 1}, {waiting, 1}}));
  EXPECT_TRUE(e.Step().empty());
  s = e.Stats();
  EXPECT_EQ(s.finished[static_cast<size_t>(FinishReason::kCancelled)], 3u);
  EXPECT_EQ(s.running + s.waiting, 0u);
}

TEST(EngineTest, PreemptionKeepsGreedyOutputsIdentical) {
  EngineConfig config;
  config.scheduler.max_batch_tokens = 8;
  HashEngine h(/*pages=*/10, /*page_tokens=*/4, config);
  Engine& e = *h.engine;
  std::map<RequestId, Request> reqs;
  for (int i = 0; i < 4; ++i) {
    Request r = GreedyRequest(Prompt(5 + i, i), 12);
    reqs[e.Submit(r).value()] = r;
  }
  const auto runs = RunAll(e);
  EXPECT_GT(e.Stats().preemptions, 0u);
  for (const auto& [id, r] : reqs) {
    const RunResult solo = SoloRun(10, 4, config, std::nullopt, r);
    EXPECT_EQ(runs.at(id).tokens, solo.tokens) << id;
    EXPECT_EQ(solo.tokens, HashGreedyReference(r.prompt, 12)) << id;
    EXPECT_EQ(runs.at(id).finishes, 1);
  }
  EXPECT_EQ(e.Stats().pages_held, 0u);
}

TEST(EngineTest, IntegrityMismatchAbortsExactlyThatRequest) {
  EngineConfig config;
  config.integrity = true;
  HashEngine h(32, 4, config);
  Engine& e = *h.engine;
  std::vector<RequestId> ids;
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) {
    reqs.push_back(GreedyRequest(Prompt(6, 10 + i), 8));
    ids.push_back(e.Submit(reqs.back()).value());
  }
  e.Step();
  e.Step();
  // A stranger reallocated the middle request's first page (as a late write or a double
  // allocation would leave it): its generation moves on under the manifest.
  const kv::PageId page = e.scheduler().Find(ids[1])->kv.pages[0];
  e.tracker_for_testing()->InjectBumpGeneration(page);
  const uint64_t calls = h.executor.forward_calls();
  const std::vector<RequestOutput> outs = e.Step();
  EXPECT_EQ(h.executor.forward_calls(), calls + 1);
  int aborted = 0;
  for (const RequestOutput& out : outs) {
    if (out.id != ids[1]) {
      EXPECT_EQ(out.new_tokens.size(), 1u);  // the others ran
      continue;
    }
    ++aborted;
    EXPECT_TRUE(out.new_tokens.empty());  // never run
    EXPECT_EQ(out.finish, FinishReason::kAbort);
    EXPECT_NE(out.finish_detail.find("kv integrity: generation"), std::string::npos) << out.finish_detail;
  }
  EXPECT_EQ(aborted, 1);
  const EngineStats s = e.Stats();
  EXPECT_EQ(s.integrity_aborts[static_cast<size_t>(kv::MismatchReason::kGeneration)], 1u);
  EXPECT_GT(s.integrity_pages_checked, 0u);
  EXPECT_EQ(s.finished[static_cast<size_t>(FinishReason::kAbort)], 1u);
  // The others finish as if nothing happened.
  auto runs = RunAll(e);
  for (int i : {0, 2}) {
    const RunResult solo = SoloRun(32, 4, config, std::nullopt, reqs[i]);
    ASSERT_EQ(solo.tokens.size(), 8u);
    // Their first two tokens came before RunAll: compare the tail.
    EXPECT_TRUE(std::equal(runs[ids[i]].tokens.begin(), runs[ids[i]].tokens.end(),
                           solo.tokens.end() - runs[ids[i]].tokens.size()));
    EXPECT_EQ(runs[ids[i]].tokens.size(), 5u);
  }
  EXPECT_EQ(e.Stats().pages_held, 0u);
}

TEST(EngineTest, ForwardFailureAbortsOnlyTheRequestItConcerns) {
  constexpr int32_t kPoison = kHashVocab - 1;
  HashEngine h(32, 4, {}, kPoison);
  Engine& e = *h.engine;
  const Request good1 = GreedyRequest(Prompt(5, 1), 6);
  const Request good2 = GreedyRequest(Prompt(7, 4), 6);  // neither samples the poison
  Request poisoned = GreedyRequest(Prompt(6, 3), 6);
  poisoned.prompt[2] = kPoison;
  const RequestId a = e.Submit(good1).value();
  const RequestId b = e.Submit(poisoned).value();
  const RequestId c = e.Submit(good2).value();
  auto runs = RunAll(e);
  EXPECT_EQ(runs[b].finish, FinishReason::kAbort);
  EXPECT_NE(runs[b].detail.find("forward pass failed"), std::string::npos) << runs[b].detail;
  EXPECT_TRUE(runs[b].tokens.empty());
  EXPECT_EQ(runs[a].finish, FinishReason::kLength);
  EXPECT_EQ(runs[c].finish, FinishReason::kLength);
  EXPECT_EQ(runs[a].tokens, SoloRun(32, 4, {}, kPoison, good1).tokens);
  EXPECT_EQ(runs[c].tokens, SoloRun(32, 4, {}, kPoison, good2).tokens);
  EXPECT_EQ(e.Stats().forward_errors, 1u);
  EXPECT_EQ(e.Stats().pages_held, 0u);
  // Still usable.
  const RequestId d = e.Submit(good1).value();
  EXPECT_EQ(RunUntilFinished(e, d).tokens, runs[a].tokens);
}

// prefill-only -> ExportKv -> decode-only ImportKv continues with the unified engine's tokens.
TEST(EngineTest, PrefillExportDecodeImportMatchesUnified) {
  const Request req = GreedyRequest(Prompt(11, 5), 9);
  const RunResult unified = SoloRun(32, 4, {}, std::nullopt, req);
  ASSERT_EQ(unified.tokens.size(), 9u);

  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  HashEngine prefill(32, 4, pconf);
  const RequestId pid = prefill.engine->Submit(req).value();
  std::vector<RequestOutput> outs = prefill.engine->Step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].new_tokens, std::vector<int32_t>{unified.tokens[0]});
  EXPECT_FALSE(outs[0].finish.has_value());
  EXPECT_TRUE(prefill.engine->Step().empty());  // held, not decoded
  EXPECT_EQ(prefill.engine->Stats().export_held, 1u);
  EXPECT_EQ(prefill.engine->ReleaseExported(pid + 1).code(), StatusCode::kFailedPrecondition);
  const KvPayload payload = prefill.engine->ExportKv(pid).value();
  EXPECT_EQ(payload.num_tokens, 11);
  EXPECT_EQ(payload.first_token, unified.tokens[0]);
  EXPECT_EQ(payload.pages.size(), 3u);

  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  HashEngine decode(40, 4, dconf);
  HashEngine unified_engine(8, 4, {});
  EXPECT_EQ(decode.engine->Submit(req).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(unified_engine.engine->ImportKv(req, payload).status().code(), StatusCode::kFailedPrecondition);
  // Imported twice: the second copy lands in other physical pages; both continue alike.
  const RequestId d1 = decode.engine->ImportKv(req, payload).value();
  const RequestId d2 = decode.engine->ImportKv(req, payload).value();
  EXPECT_NE(decode.engine->scheduler().Find(d1)->kv.pages, decode.engine->scheduler().Find(d2)->kv.pages);
  auto runs = RunAll(*decode.engine);
  for (RequestId id : {d1, d2}) {
    std::vector<int32_t> joined{payload.first_token};
    joined.insert(joined.end(), runs[id].tokens.begin(), runs[id].tokens.end());
    EXPECT_EQ(joined, unified.tokens);
    EXPECT_EQ(runs[id].finish, FinishReason::kLength);
  }
  EXPECT_EQ(decode.engine->Stats().pages_held, 0u);

  ASSERT_TRUE(prefill.engine->ReleaseExported(pid).ok());
  EXPECT_EQ(prefill.engine->Stats().pages_held, 0u);
  EXPECT_EQ(prefill.engine->Stats().exported, 1u);
  EXPECT_EQ(prefill.engine->ExportKv(pid).status().code(), StatusCode::kFailedPrecondition);
}

TEST(EngineTest, ExportVerifiesThePagesFirst) {
  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  pconf.integrity = true;
  HashEngine prefill(32, 4, pconf);
  Engine& e = *prefill.engine;
  const RequestId a = e.Submit(GreedyRequest(Prompt(6, 1), 4)).value();
  const RequestId b = e.Submit(GreedyRequest(Prompt(6, 2), 4)).value();
  e.Step();
  e.tracker_for_testing()->InjectBumpGeneration(e.scheduler().Find(b)->kv.pages[1]);
  EXPECT_TRUE(e.ExportKv(a).ok());
  EXPECT_EQ(e.ExportKv(b).status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(e.Cancel(b).ok());
  ASSERT_TRUE(e.ReleaseExported(a).ok());
  EXPECT_EQ(e.Stats().pages_held, 0u);
}

TEST(EngineTest, ImportRejectsMismatchedKv) {
  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  HashEngine prefill(32, 4, pconf);
  const Request req = GreedyRequest(Prompt(6, 1), 4);
  const RequestId pid = prefill.engine->Submit(req).value();
  prefill.engine->Step();
  const KvPayload good = prefill.engine->ExportKv(pid).value();
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  HashEngine decode(32, 4, dconf);
  Engine& d = *decode.engine;
  auto expect_bad = [&](KvPayload p, const Request& r, const char* what) {
    const Status st = d.ImportKv(r, p).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  KvPayload p = good;
  p.dtype = KvCacheDtype::kFp8E4M3;
  expect_bad(p, req, "dtype mismatch");
  p = good;
  p.page_tokens = 8;
  expect_bad(p, req, "geometry mismatch");
  p = good;
  p.shape.num_layers = 2;
  expect_bad(p, req, "shape mismatch");
  p = good;
  p.pages.pop_back();
  expect_bad(p, req, "pages");
  p = good;
  p.pages[0].resize(3);
  expect_bad(p, req, "bytes");
  expect_bad(good, GreedyRequest(Prompt(7, 1), 4), "tokens");
  p = good;
  p.first_token = kHashVocab;
  expect_bad(p, req, "vocabulary");
  p = good;
  p.pages[1][5] ^= 0x40;  // a bit flipped in transit
  EXPECT_EQ(d.ImportKv(req, p).status().code(), StatusCode::kDataLoss);
  Request one = req;
  one.params.max_tokens = 1;  // the first token was the last: nothing to decode
  EXPECT_EQ(d.ImportKv(one, good).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.Stats().pages_held, 0u);
  EXPECT_TRUE(d.ImportKv(req, good).ok());
}

TEST(EngineTest, ExportedPagesInATransferAreFreedOnlyWhenItEnds) {
  FakeClock clock;
  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  pconf.clock = &clock;
  HashEngine prefill(32, 4, pconf);
  Engine& e = *prefill.engine;
  const RequestId a = e.Submit(GreedyRequest(Prompt(9, 1), 4)).value();
  const RequestId b = e.Submit(GreedyRequest(Prompt(5, 2), 4)).value();
  e.Step();
  ASSERT_TRUE(e.BeginTransfer(1, a, /*timeout_ms=*/100).ok());
  ASSERT_TRUE(e.BeginTransfer(2, b, 100).ok());
  EXPECT_EQ(e.BeginTransfer(3, 999, 100).code(), StatusCode::kNotFound);
  ASSERT_TRUE(e.ReleaseExported(a).ok());  // handed off while its transfer still runs
  ASSERT_TRUE(e.Cancel(b).ok());           // cancelled mid-transfer
  EngineStats s = e.Stats();
  EXPECT_EQ(s.pages_held, 5u);
  EXPECT_EQ(s.pages_deferred, 5u);
  e.Step();
  EXPECT_EQ(e.Stats().pages_held, 5u);
  ASSERT_TRUE(e.FinishTransfer(1, kv::TransferState::kDone).ok());
  e.Step();
  EXPECT_EQ(e.Stats().pages_held, 2u);
  clock.AdvanceMillis(100);  // transfer 2 times out
  e.Step();
  EXPECT_EQ(e.Stats().pages_held, 0u);
  EXPECT_EQ(e.FinishTransfer(2, kv::TransferState::kDone).code(), StatusCode::kFailedPrecondition);
}

TEST(EngineTest, PrefixCacheIsSharedWithinATenantOnly) {
  EngineConfig config;
  config.prefix_cache = true;
  HashEngine h(32, 4, config);
  Engine& e = *h.engine;
  Request r = GreedyRequest(Prompt(13, 4), 5);
  r.tenant = "org-1";
  const RunResult first = RunUntilFinished(e, e.Submit(r).value());
  const uint64_t computed = e.Stats().computed_tokens;
  const RunResult again = RunUntilFinished(e, e.Submit(r).value());
  EngineStats s = e.Stats();
  EXPECT_EQ(s.prefix_cache_hits, 1u);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 12u);         // 3 whole pages of the 13-token prompt
  EXPECT_EQ(s.computed_tokens - computed, 1u + 4u);  // the last prompt token, then decode
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(first.tokens, HashGreedyReference(r.prompt, 5));
  r.tenant = "org-2";  // same prompt, another tenant: no sharing
  const RunResult other = RunUntilFinished(e, e.Submit(r).value());
  s = e.Stats();
  EXPECT_EQ(s.prefix_cache_hits, 1u);
  EXPECT_EQ(other.tokens, first.tokens);
  EXPECT_EQ(s.pages_held, s.prefix_cache_pages);
  EXPECT_EQ(s.prefix_cache_pages, 6u);  // 3 pages per tenant
}

TEST(EngineTest, RequestsTooLongForThePoolFinishWithLength) {
  HashEngine h(/*pages=*/3, /*page_tokens=*/4, {});
  Engine& e = *h.engine;
  const RequestId id = e.Submit(GreedyRequest(Prompt(10, 1), 20)).value();
  const RunResult r = RunUntilFinished(e, id);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 3u);  // 10 prompt + 2 fed outputs fill the 12 slots; the 3rd has none
  EXPECT_NE(r.detail.find("KV cache"), std::string::npos) << r.detail;
  EXPECT_EQ(e.Stats().pages_held, 0u);
}

}  // namespace
}  // namespace tandem::engine::runtime
