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

// prefill-only -> ExportKv -> decode-only ReserveImport / WritePage / CommitImport continues with
// the unified engine's tokens.
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
  EXPECT_EQ(prefill.engine->FinishExport(pid, kv::TransferState::kDone).code(),
            StatusCode::kFailedPrecondition);

  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  HashEngine decode(40, 4, dconf);
  HashEngine unified_engine(8, 4, {});
  EXPECT_EQ(decode.engine->Submit(req).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(unified_engine.engine->ReserveImport(req).status().code(), StatusCode::kFailedPrecondition);
  // Imported twice: the second copy lands in other physical pages; both continue alike.
  std::vector<RequestId> ids;
  for (int copy = 0; copy < 2; ++copy) {
    const ImportReservation r = decode.engine->ReserveImport(req).value();
    EXPECT_EQ(r.num_tokens, 11);
    EXPECT_EQ(r.page_tags.size(), 3u);
    std::shared_ptr<KvExport> exported = prefill.engine->ExportKv(pid, r.layout).value();
    EXPECT_EQ(exported->num_pages(), 3u);
    EXPECT_EQ(exported->first_token(), unified.tokens[0]);
    EXPECT_EQ(prefill.engine->ExportKv(pid, r.layout).status().code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(SendPages(*decode.engine, r, *exported).ok());
    EXPECT_EQ(decode.engine->CommitImport(r.transfer_id, 0, 0).code(), StatusCode::kFailedPrecondition);
    if (copy == 0) {  // a failed export aborts the prefill request; it is submitted again
      ASSERT_TRUE(prefill.engine->FinishExport(pid, kv::TransferState::kFailed).ok());
      outs = prefill.engine->Step();
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_EQ(outs[0].finish, FinishReason::kAbort);
      Request again = req;
      again.id = pid;
      ASSERT_EQ(prefill.engine->Submit(again).value(), pid);
      prefill.engine->Step();
    } else {
      ASSERT_TRUE(prefill.engine->FinishExport(pid, kv::TransferState::kDone).ok());
    }
    ids.push_back(r.id);
  }
  EXPECT_NE(decode.engine->scheduler().Find(ids[0])->kv.pages,
            decode.engine->scheduler().Find(ids[1])->kv.pages);
  auto runs = RunAll(*decode.engine);
  for (RequestId id : ids) {
    std::vector<int32_t> joined{unified.tokens[0]};
    joined.insert(joined.end(), runs[id].tokens.begin(), runs[id].tokens.end());
    EXPECT_EQ(joined, unified.tokens);
    EXPECT_EQ(runs[id].finish, FinishReason::kLength);
  }
  EXPECT_EQ(decode.engine->Stats().pages_held, 0u);
  EXPECT_EQ(decode.engine->Stats().imports_committed, 2u);
  EXPECT_EQ(decode.engine->Stats().import_bytes, 6 * decode.pool->geometry().page_bytes);

  outs = prefill.engine->Step();  // the hand-off's last output
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(outs[0].exported);
  EXPECT_FALSE(outs[0].finish.has_value());
  EXPECT_EQ(prefill.engine->Stats().pages_held, 0u);
  EXPECT_EQ(prefill.engine->Stats().exported, 1u);
  EXPECT_EQ(prefill.engine->Stats().export_failures, 1u);
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
  const kv::KvLayout layout = kv::LayoutOf(*prefill.pool).value();
  e.tracker_for_testing()->InjectBumpGeneration(e.scheduler().Find(b)->kv.pages[1]);
  EXPECT_TRUE(e.ExportKv(a, layout).ok());
  EXPECT_EQ(e.ExportKv(b, layout).status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(e.Cancel(b).ok());
  ASSERT_TRUE(e.FinishExport(a, kv::TransferState::kDone).ok());
  e.Step();
  EXPECT_EQ(e.Stats().pages_held, 0u);
}

// Every way a transfer can go wrong is refused, ends in exactly one terminal state, aborts only
// its request and frees its pages.
TEST(EngineTest, ImportRefusesBadTransfers) {
  FakeClock clock;
  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  HashEngine prefill(32, 4, pconf);
  const Request req = GreedyRequest(Prompt(6, 1), 4);
  const RequestId pid = prefill.engine->Submit(req).value();
  prefill.engine->Step();
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  dconf.clock = &clock;
  dconf.import_timeout_ms = 1000;
  HashEngine decode(8, 4, dconf);
  Engine& d = *decode.engine;
  const size_t page_bytes = decode.pool->geometry().page_bytes;

  // A layout the sender cannot convert into.
  kv::KvLayout other = kv::LayoutOf(*decode.pool).value();
  other.page_tokens = 8;
  EXPECT_EQ(prefill.engine->ExportKv(pid, other).status().code(), StatusCode::kInvalidArgument);

  // Wrong tag, page index or size: refused, nothing lands; a page never sent fails the commit.
  ImportReservation r = d.ReserveImport(req).value();
  std::shared_ptr<KvExport> x = prefill.engine->ExportKv(pid, r.layout).value();
  std::vector<uint8_t> page(page_bytes);
  ASSERT_TRUE(x->NextPage(page).ok());
  EXPECT_EQ(d.WritePage(r.transfer_id, 0, page, r.page_tags[0] ^ 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.WritePage(r.transfer_id, 0, page, r.page_tags[1]).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.WritePage(r.transfer_id, 2, page, r.page_tags[0]).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.WritePage(r.transfer_id, 0, std::span<const uint8_t>(page).first(3), r.page_tags[0]).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Stats().refused_transfer_writes, 4u);
  ASSERT_TRUE(d.WritePage(r.transfer_id, 0, page, r.page_tags[0]).ok());
  EXPECT_EQ(d.CommitImport(r.transfer_id, x->first_token(), x->digest()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Stats().imports_failed, 1u);
  // The transfer has ended: a late write is refused and counted, never lands.
  ASSERT_TRUE(x->NextPage(page).ok());
  EXPECT_EQ(d.WritePage(r.transfer_id, 1, page, r.page_tags[1]).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.Stats().late_transfer_writes, 1u);
  std::vector<RequestOutput> outs = d.Step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].id, r.id);
  EXPECT_EQ(outs[0].finish, FinishReason::kAbort);
  EXPECT_NE(outs[0].finish_detail.find("never arrived"), std::string::npos) << outs[0].finish_detail;
  EXPECT_EQ(d.Stats().pages_held, 0u);
  ASSERT_TRUE(prefill.engine->FinishExport(pid, kv::TransferState::kFailed).ok());

  // A bit flipped in transit: the digest does not match.
  auto fresh_export = [&] {
    const RequestId id = prefill.engine->Submit(req).value();
    prefill.engine->Step();
    return id;
  };
  RequestId p2 = fresh_export();
  r = d.ReserveImport(req).value();
  x = prefill.engine->ExportKv(p2, r.layout).value();
  for (uint32_t p = 0; p < x->num_pages(); ++p) {
    ASSERT_TRUE(x->NextPage(page).ok());
    if (p == 1) page[5] ^= 0x40;
    ASSERT_TRUE(d.WritePage(r.transfer_id, p, page, r.page_tags[p]).ok());
  }
  EXPECT_EQ(d.CommitImport(r.transfer_id, x->first_token(), x->digest()).code(), StatusCode::kDataLoss);
  d.Step();
  EXPECT_EQ(d.Stats().pages_held, 0u);
  EXPECT_EQ(d.Stats().imports_failed, 2u);

  // AbortImport, and a reservation left to its deadline.
  r = d.ReserveImport(req).value();
  ASSERT_TRUE(d.AbortImport(r.transfer_id, "prefill failed").ok());
  EXPECT_EQ(d.AbortImport(r.transfer_id, "again").code(), StatusCode::kFailedPrecondition);
  outs = d.Step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_NE(outs[0].finish_detail.find("prefill failed"), std::string::npos);
  r = d.ReserveImport(req).value();
  EXPECT_EQ(d.NextDeadlineNanos(), r.deadline_nanos);
  EXPECT_EQ(d.Stats().pages_held, 2u);
  clock.AdvanceMillis(999);
  EXPECT_TRUE(d.Step().empty());
  clock.AdvanceMillis(1);
  outs = d.Step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish, FinishReason::kAbort);
  EXPECT_NE(outs[0].finish_detail.find("timed out"), std::string::npos);
  EXPECT_EQ(d.Stats().imports_timed_out, 1u);
  EXPECT_EQ(d.Stats().pages_held, 0u);
  EXPECT_FALSE(d.NextDeadlineNanos().has_value());

  // Not enough pages now: refused before any prefill work; a first token that ends the request.
  EXPECT_EQ(d.ReserveImport(GreedyRequest(Prompt(40, 1), 4)).status().code(), StatusCode::kOutOfRange);
  const ImportReservation big = d.ReserveImport(GreedyRequest(Prompt(20, 1), 4)).value();
  EXPECT_EQ(d.ReserveImport(GreedyRequest(Prompt(20, 2), 4)).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(d.AbortImport(big.transfer_id, "test").ok());
  d.Step();
  Request one = req;
  one.params.max_tokens = 1;
  r = d.ReserveImport(one).value();
  RequestId p3 = fresh_export();
  x = prefill.engine->ExportKv(p3, r.layout).value();
  ASSERT_TRUE(SendPages(d, r, *x).ok());
  outs = d.Step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish, FinishReason::kLength);
  EXPECT_TRUE(outs[0].new_tokens.empty());  // the first token was the prefill side's to emit
  EXPECT_EQ(d.Stats().pages_held, 0u);
}

// transfer_checksum off (integrity.transferChecksum: false): the export digests nothing and the
// commit compares nothing, so a flipped bit lands; an importer with it on refuses a sender without.
TEST(EngineTest, TransferChecksumOffSkipsTheDigestOnBothSides) {
  const Request req = GreedyRequest(Prompt(6, 1), 4);
  for (const bool importer_checks : {false, true}) {
    EngineConfig pconf;
    pconf.role = EngineRole::kPrefillOnly;
    pconf.transfer_checksum = false;
    HashEngine prefill(32, 4, pconf);
    const RequestId pid = prefill.engine->Submit(req).value();
    prefill.engine->Step();
    EngineConfig dconf;
    dconf.role = EngineRole::kDecodeOnly;
    dconf.transfer_checksum = importer_checks;
    HashEngine decode(8, 4, dconf);
    Engine& d = *decode.engine;
    ImportReservation r = d.ReserveImport(req).value();
    std::shared_ptr<KvExport> x = prefill.engine->ExportKv(pid, r.layout).value();
    std::vector<uint8_t> page(decode.pool->geometry().page_bytes);
    for (uint32_t p = 0; p < x->num_pages(); ++p) {
      ASSERT_TRUE(x->NextPage(page).ok());
      if (p == 1) page[5] ^= 0x40;
      ASSERT_TRUE(d.WritePage(r.transfer_id, p, page, r.page_tags[p]).ok());
    }
    EXPECT_EQ(x->digest(), 0u);
    const Status commit = d.CommitImport(r.transfer_id, x->first_token(), x->digest());
    if (importer_checks) {
      EXPECT_EQ(commit.code(), StatusCode::kDataLoss);
      EXPECT_NE(commit.message().find("no transfer checksum"), std::string::npos) << commit.ToString();
      EXPECT_EQ(d.Stats().imports_failed, 1u);
    } else {
      EXPECT_TRUE(commit.ok()) << commit.ToString();
      EXPECT_EQ(d.Stats().imports_committed, 1u);
    }
    ASSERT_TRUE(prefill.engine->FinishExport(pid, kv::TransferState::kDone).ok());
  }
}

// Cancelling a request whose KV is still arriving ends its transfer; its pages are free at once.
TEST(EngineTest, CancelDuringImportEndsTheTransfer) {
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  HashEngine decode(8, 4, dconf);
  Engine& d = *decode.engine;
  const ImportReservation r = d.ReserveImport(GreedyRequest(Prompt(6, 1), 4)).value();
  ASSERT_TRUE(d.Cancel(r.id).ok());
  std::vector<uint8_t> page(r.layout.page_bytes);
  EXPECT_EQ(d.WritePage(r.transfer_id, 0, page, r.page_tags[0]).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.CommitImport(r.transfer_id, 1, 0).code(), StatusCode::kFailedPrecondition);
  const std::vector<RequestOutput> outs = d.Step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish, FinishReason::kCancelled);
  EXPECT_EQ(d.Stats().pages_held, 0u);
  EXPECT_EQ(d.Stats().imports_in_flight, 0u);
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
  std::shared_ptr<KvExport> exported = e.ExportKv(a, kv::LayoutOf(*prefill.pool).value()).value();
  ASSERT_TRUE(e.BeginTransfer(2, b, 100).ok());
  EXPECT_EQ(e.BeginTransfer(3, 999, 100).code(), StatusCode::kNotFound);
  ASSERT_TRUE(e.Cancel(a).ok());  // cancelled while its pages are being sent
  ASSERT_TRUE(e.Cancel(b).ok());  // cancelled mid-transfer
  EngineStats s = e.Stats();
  EXPECT_EQ(s.pages_held, 5u);
  EXPECT_EQ(s.pages_deferred, 5u);
  e.Step();
  std::vector<uint8_t> page(exported->layout().page_bytes);
  EXPECT_TRUE(exported->NextPage(page).ok());  // still readable: nothing was reused
  EXPECT_EQ(e.Stats().pages_held, 5u);
  ASSERT_TRUE(e.FinishExport(a, kv::TransferState::kDone).ok());
  e.Step();
  EXPECT_EQ(e.Stats().pages_held, 2u);
  EXPECT_EQ(e.Stats().exported, 0u);  // it had been cancelled: nothing was handed off
  clock.AdvanceMillis(100);           // transfer 2 times out
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
  EXPECT_EQ(first.cached_prompt_tokens, 0);
  EXPECT_EQ(again.cached_prompt_tokens, 12);  // reported with the first token (usage.cached_tokens)
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

// A request that ends at its first token (max_tokens 1: a prefill-only probe, a classifier) is
// never scheduled again, where running requests publish their prompt: it publishes as it ends.
TEST(EngineTest, ARequestEndingAtItsFirstTokenStillPublishesItsPrompt) {
  EngineConfig config;
  config.prefix_cache = true;
  HashEngine h(32, 4, config);
  Engine& e = *h.engine;
  Request r = GreedyRequest(Prompt(13, 4), 1);
  r.tenant = "org-1";
  const RunResult first = RunUntilFinished(e, e.Submit(r).value());
  ASSERT_EQ(first.tokens.size(), 1u);
  EXPECT_EQ(e.Stats().prefix_cache_pages, 3u);
  const RunResult again = RunUntilFinished(e, e.Submit(r).value());
  EXPECT_EQ(again.cached_prompt_tokens, 12);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(e.Stats().prefix_cache_hits, 1u);
  EXPECT_EQ(e.Stats().pages_held, e.Stats().prefix_cache_pages);
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
