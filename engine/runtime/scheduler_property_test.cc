// The scheduler property test: random arrivals, cancellations, transfers (deferred release),
// prompt and output lengths, pool sizes and batch knobs, over the Engine with the HashExecutor
// (which reads every token back from the real KV pages), with the prefix cache on for half the
// seeds (shared prompt prefixes across three tenants). After every step: no leaked page, every
// request finishes at most once; at the end every request has finished exactly once, the pool is
// empty, every request's tokens are the model's greedy tokens for its prompt (computed from the
// token list alone, HashGreedyReference), and each request that was not cancelled produced exactly
// the tokens and finish reason of a solo run on a fresh engine.
//
// Steps over all seeds: TANDEM_SCHED_PROPERTY_STEPS (the unit binary runs fewer; the `slow`
// binary engine_runtime_scheduler_slow_test runs 10^5).

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "engine/runtime/engine_test_util.h"

#ifndef TANDEM_SCHED_PROPERTY_STEPS
#define TANDEM_SCHED_PROPERTY_STEPS 20000
#endif

namespace tandem::engine::runtime {
namespace {

constexpr int kSeeds = 8;
constexpr int32_t kPoison = kHashVocab - 1;

struct Tracked {
  Request request;
  std::vector<int32_t> tokens;
  std::optional<FinishReason> finish;
  std::string detail;
  bool cancelled = false;
};

struct Totals {
  uint64_t requests = 0, finished = 0, compared = 0, preemptions = 0, rejected = 0, cancelled = 0,
           aborted = 0, deferred_pages = 0, prefix_hits = 0;
};

void RunSeed(uint64_t seed, int steps, Totals* totals) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const size_t page_tokens = std::vector<size_t>{1, 2, 4, 8, 16}[uniform(0, 4)];
  const size_t pages = static_cast<size_t>(uniform(3, 40)) * 16 / page_tokens + 2;
  const size_t capacity = pages * page_tokens;
  EngineConfig config;
  config.scheduler.max_batch_tokens = uniform(1, 64);
  config.scheduler.max_running_requests = uniform(1, 10);
  config.integrity = seed % 2 == 1;
  config.prefix_cache = seed / 2 % 2 == 1;
  // With the prefix cache, half the prompts start with one of a few shared prefixes, from one of
  // three tenants (the same prefix under another tenant must not be shared).
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& prefix : prefixes) {
    prefix.resize(static_cast<size_t>(uniform(4, 24)));
    for (int32_t& t : prefix) t = static_cast<int32_t>(uniform(0, kHashVocab - 2));
  }
  FakeClock clock;
  config.clock = &clock;
  const std::optional<int32_t> poison = seed % 3 == 0 ? std::optional<int32_t>(kPoison) : std::nullopt;
  SCOPED_TRACE("seed " + std::to_string(seed) + ": " + std::to_string(pages) + " pages of " +
               std::to_string(page_tokens) + ", max_batch_tokens " +
               std::to_string(config.scheduler.max_batch_tokens) + ", max_running " +
               std::to_string(config.scheduler.max_running_requests) +
               (config.prefix_cache ? ", prefix cache" : ""));
  HashEngine h(pages, page_tokens, config, poison);
  Engine& engine = *h.engine;

  std::map<RequestId, Tracked> requests;
  std::set<RequestId> live;
  std::map<uint64_t, RequestId> transfers;  // in flight
  uint64_t next_transfer = 1;
  // A live request not cancelled yet (its cancelled finish arrives with the next Step), or 0.
  auto pick_live = [&]() -> RequestId {
    std::vector<RequestId> ids;
    for (RequestId id : live) {
      if (!requests.at(id).cancelled) ids.push_back(id);
    }
    return ids.empty() ? 0 : ids[static_cast<size_t>(uniform(0, static_cast<int64_t>(ids.size()) - 1))];
  };
  auto check_step = [&](const std::vector<RequestOutput>& outputs) {
    for (const RequestOutput& out : outputs) {
      ASSERT_TRUE(live.count(out.id)) << "output for request " << out.id << " that is not live";
      Tracked& t = requests.at(out.id);
      t.tokens.insert(t.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finish) {
        t.finish = out.finish;
        t.detail = out.finish_detail;
        live.erase(out.id);
      }
    }
    ASSERT_EQ(engine.scheduler().num_live(), live.size());
    size_t refs = 0;
    for (kv::PageId p = 0; p < engine.allocator().num_pages(); ++p) refs += engine.allocator().refcount(p);
    const kv::PrefixCache* cache = engine.prefix_cache();
    ASSERT_EQ(refs, engine.scheduler().pages_held_by_requests() + engine.ledger().parked_pages() +
                        (cache != nullptr ? cache->cached_pages() : 0))
        << "leaked or lost page references";
  };

  for (int step = 0; step < steps; ++step) {
    if (live.size() < 16 && chance(0.3)) {
      // Now and then a prompt that can never fit, to exercise rejection.
      const int64_t max_prompt = chance(0.02) ? static_cast<int64_t>(capacity) + 4
                                              : std::min<int64_t>(48, static_cast<int64_t>(capacity) - 1);
      std::vector<int32_t> prompt(static_cast<size_t>(uniform(1, max_prompt)));
      for (int32_t& t : prompt) t = static_cast<int32_t>(uniform(0, kHashVocab - 2));
      if (config.prefix_cache && chance(0.5)) {
        const std::vector<int32_t>& prefix = prefixes[static_cast<size_t>(uniform(0, 2))];
        std::copy_n(prefix.begin(), std::min(prefix.size(), prompt.size()), prompt.begin());
      }
      if (poison && chance(0.02))
        prompt[static_cast<size_t>(uniform(0, static_cast<int64_t>(prompt.size()) - 1))] = kPoison;
      Request r = GreedyRequest(prompt, static_cast<int32_t>(uniform(1, 40)));
      r.tenant = std::vector<std::string>{"", "a", "b"}[static_cast<size_t>(uniform(0, 2))];
      StatusOr<RequestId> id = engine.Submit(r);
      if (prompt.size() + 1 > capacity) {
        ASSERT_EQ(id.status().code(), StatusCode::kOutOfRange);
        ++totals->rejected;
      } else {
        ASSERT_TRUE(id.ok()) << id.status().ToString();
        requests[*id].request = r;
        live.insert(*id);
        ++totals->requests;
      }
    }
    if (const RequestId id = pick_live(); id != 0 && chance(0.03)) {
      ASSERT_TRUE(engine.Cancel(id).ok());
      requests.at(id).cancelled = true;
    }
    if (const RequestId id = pick_live(); id != 0 && chance(0.02)) {
      ASSERT_TRUE(engine.BeginTransfer(next_transfer, id, uniform(1, 50)).ok());
      transfers[next_transfer++] = id;
    }
    if (!transfers.empty() && chance(0.05)) {
      const auto it = transfers.begin();
      const auto terminal = chance(0.5) ? kv::TransferState::kDone : kv::TransferState::kFailed;
      (void)engine.FinishTransfer(it->first, terminal);  // may have timed out already
      transfers.erase(it);
    }
    clock.AdvanceMillis(1);
    check_step(engine.Step());
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Drain: no more arrivals; transfers time out; everything finishes.
  for (int s = 0; s < 100000 && !live.empty(); ++s) {
    clock.AdvanceMillis(1);
    check_step(engine.Step());
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_TRUE(live.empty());
  clock.AdvanceMillis(100);
  check_step(engine.Step());  // reclaims the last deferred pages
  const EngineStats stats = engine.Stats();
  EXPECT_EQ(engine.allocator().held_pages(), stats.prefix_cache_pages);  // only the cache holds pages
  totals->prefix_hits += stats.prefix_cache_hits;
  EXPECT_EQ(stats.integrity_aborts, (std::array<uint64_t, kv::kNumMismatchReasons>{}));
  totals->preemptions += stats.preemptions;
  totals->deferred_pages += engine.ledger().counters().deferred_pages;

  for (auto& [id, t] : requests) {
    ASSERT_TRUE(t.finish.has_value()) << "request " << id;
    ++totals->finished;
    // Whatever was emitted, cancelled or not, is what the model gives this prompt.
    const std::vector<int32_t> expected = HashGreedyReference(t.request.prompt, t.tokens.size());
    ASSERT_EQ(t.tokens, expected) << "request " << id << " differs from the model's greedy tokens";
    if (t.cancelled) {
      ++totals->cancelled;
      continue;
    }
    totals->aborted += *t.finish == FinishReason::kAbort;
    ASSERT_LE(t.tokens.size(), static_cast<size_t>(t.request.params.max_tokens));
    const RunResult solo = SoloRun(pages, page_tokens, config, poison, t.request);
    ASSERT_EQ(solo.finishes, 1);
    EXPECT_EQ(t.tokens, solo.tokens) << "request " << id << " differs from its solo run";
    EXPECT_EQ(t.finish, solo.finish) << "request " << id << ": " << t.detail << " vs " << solo.detail;
    ++totals->compared;
  }
}

TEST(SchedulerPropertyTest, RandomWorkloadsMatchSoloRuns) {
  Totals totals;
  for (int seed = 0; seed < kSeeds; ++seed) {
    RunSeed(static_cast<uint64_t>(seed), TANDEM_SCHED_PROPERTY_STEPS / kSeeds, &totals);
    if (HasFatalFailure()) return;
  }
  std::printf(
      "steps %d, requests %llu (rejected %llu), compared with solo runs %llu, cancelled %llu, "
      "aborted %llu, preemptions %llu, deferred pages %llu, prefix cache hits %llu\n",
      TANDEM_SCHED_PROPERTY_STEPS, static_cast<unsigned long long>(totals.requests),
      static_cast<unsigned long long>(totals.rejected), static_cast<unsigned long long>(totals.compared),
      static_cast<unsigned long long>(totals.cancelled), static_cast<unsigned long long>(totals.aborted),
      static_cast<unsigned long long>(totals.preemptions),
      static_cast<unsigned long long>(totals.deferred_pages),
      static_cast<unsigned long long>(totals.prefix_hits));
  // The workload must actually exercise what the test claims to check.
  EXPECT_GT(totals.compared, 100u);
  EXPECT_GT(totals.preemptions, 10u);
  EXPECT_GT(totals.cancelled, 10u);
  EXPECT_GT(totals.deferred_pages, 0u);
  EXPECT_GT(totals.prefix_hits, 10u);
}

}  // namespace
}  // namespace tandem::engine::runtime
