// Integrity at the Engine level, over the HashExecutor and the real PagePool: each KV fault is
// injected through the public path between two steps, and the next step must abort exactly the
// victim (finish `abort`, the named reason, one incident log line) before Forward, so that no
// request reads a byte of another request's KV and every other request's output equals its solo
// run token for token. With integrity off the same fault is seen corrupting a read, so the test can
// see what it claims to prevent. Also: the incident line and its rate limit, and that requests
// without a tenant share no prefix pages.

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/logging.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/engine_test_util.h"

namespace tandem::engine::runtime {
namespace {

constexpr size_t kPages = 48, kPageTokens = 4;
constexpr int32_t kMaxTokens = 8;

std::vector<int32_t> Prompt(size_t n, int32_t salt) {
  std::vector<int32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>((salt * 11 + i * 17) % (kHashVocab - 1));
  return p;
}

enum class Fault { kSwappedListEntry, kFreedAndReallocated, kLateTransferWrite, kStalePrefixPage };

// An engine whose HashExecutor logs every page each sequence reads; Step() counts, per step, the
// reads of a page some live request holds (a current allocator reference in its block table) by a
// sequence that does not hold it, and every read by the marked victim.
class FaultRun {
 public:
  FaultRun(bool integrity, bool prefix_cache)
      : config_(Config(integrity, prefix_cache)), h_(kPages, kPageTokens, config_) {
    h_.executor.RecordReads(&reads_);
  }
  static EngineConfig Config(bool integrity, bool prefix_cache) {
    EngineConfig c;
    c.integrity = integrity;
    c.prefix_cache = prefix_cache;
    return c;
  }

  Engine& engine() { return *h_.engine; }
  kv::PagePool& pool() { return *h_.pool; }
  Sequence& seq(RequestId id) {
    Sequence* s = engine().scheduler().Find(id);
    TANDEM_CHECK(s != nullptr) << "request " << id << " is not live";
    return *s;
  }

  void Cancel(RequestId id) {
    EXPECT_TRUE(engine().Cancel(id).ok());
    cancelled_.insert(id);
  }

  RequestId Submit(std::vector<int32_t> prompt, std::string tenant = "") {
    Request r = GreedyRequest(std::move(prompt), kMaxTokens);
    r.tenant = std::move(tenant);
    const RequestId id = engine().Submit(r).value();
    requests_[id] = r;
    return id;
  }

  // The fault comes next: from now on the victim's reads and emitted tokens are counted.
  void MarkFault(RequestId victim) {
    victim_ = victim;
    victim_kv_ = &seq(victim).kv;
    faulted_ = true;
  }

  void Step() {
    std::map<kv::PageId, std::set<const model::KvSequence*>> holders;
    for (const auto& [id, r] : requests_) {
      const Sequence* s = engine().scheduler().Find(id);
      if (s == nullptr) continue;
      for (const kv::PageRef& ref : s->table.pages()) {
        if (engine().allocator().IsCurrent(ref)) holders[ref.page].insert(&s->kv);
      }
    }
    const bool victim_live = faulted_ && engine().scheduler().Find(victim_) != nullptr;
    reads_.clear();
    for (const RequestOutput& out : engine().Step()) {
      RunResult& run = runs_[out.id];
      run.tokens.insert(run.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (faulted_ && out.id == victim_) victim_tokens_after_fault_ += out.new_tokens.size();
      if (out.finish) {
        run.finish = out.finish;
        run.detail = out.finish_detail;
        ++run.finishes;
      }
    }
    if (!faulted_) return;
    for (const HashExecutor::PageRead& r : reads_) {
      auto it = holders.find(r.page);
      if (it != holders.end() && it->second.count(r.seq) == 0) ++foreign_reads_;
      if (victim_live && r.seq == victim_kv_) ++victim_reads_;
    }
  }
  void RunToEnd() {
    for (int s = 0; s < 1000 && engine().scheduler().num_live() > 0; ++s) Step();
    ASSERT_EQ(engine().scheduler().num_live(), 0u);
  }

  // Requests (other than the victim) whose output differs from their solo run (a cancelled one's
  // from the start of it).
  std::vector<RequestId> OthersThatDifferFromSolo() {
    std::vector<RequestId> differ;
    for (const auto& [id, r] : requests_) {
      if (id == victim_) continue;
      const RunResult solo = SoloRun(kPages, kPageTokens, config_, std::nullopt, r);
      const std::vector<int32_t>& got = runs_[id].tokens;
      const bool same =
          cancelled_.count(id) != 0
              ? got.size() <= solo.tokens.size() && std::equal(got.begin(), got.end(), solo.tokens.begin())
              : got == solo.tokens && runs_[id].finish == solo.finish;
      if (!same) differ.push_back(id);
    }
    return differ;
  }
  bool VictimDiffersFromSolo() {
    const RunResult solo = SoloRun(kPages, kPageTokens, config_, std::nullopt, requests_.at(victim_));
    return runs_[victim_].tokens != solo.tokens;
  }

  RequestId victim() const { return victim_; }
  const RunResult& run(RequestId id) { return runs_[id]; }
  size_t foreign_reads() const { return foreign_reads_; }
  size_t victim_reads() const { return victim_reads_; }
  size_t victim_tokens_after_fault() const { return victim_tokens_after_fault_; }

 private:
  EngineConfig config_;
  HashEngine h_;
  std::vector<HashExecutor::PageRead> reads_;
  std::map<RequestId, Request> requests_;
  std::map<RequestId, RunResult> runs_;
  std::set<RequestId> cancelled_;
  bool faulted_ = false;
  RequestId victim_ = 0;
  const model::KvSequence* victim_kv_ = nullptr;
  size_t foreign_reads_ = 0, victim_reads_ = 0, victim_tokens_after_fault_ = 0;
};

// Runs `fault` among live requests and returns the run (stepped to the end). Prompts of 6 tokens
// fill 2 pages of 4, so no running request allocates a page in the step right after the fault:
// a page freed by the fault goes to the request admitted then.
void RunFault(Fault fault, FaultRun& run) {
  switch (fault) {
    case Fault::kSwappedListEntry: {
      // A block-table bug: the victim's page list (what attention reads) names another live
      // request's page. The manifest and every generation are untouched.
      const RequestId a = run.Submit(Prompt(6, 1));
      const RequestId b = run.Submit(Prompt(6, 2));
      const RequestId c = run.Submit(Prompt(6, 3));
      run.Step();
      run.MarkFault(a);
      run.seq(a).kv.pages[0] = run.seq(b).kv.pages[0];
      (void)c;
      break;
    }
    case Fault::kFreedAndReallocated: {
      const RequestId a = run.Submit(Prompt(6, 1));
      run.Submit(Prompt(6, 2));
      run.Step();
      const kv::PageId page = run.seq(a).kv.pages[0];
      run.MarkFault(a);
      run.engine().allocator_for_testing()->InjectFreeWhileMapped(page);
      const RequestId c = run.Submit(Prompt(6, 3));  // admitted next step: takes the freed page
      run.Step();
      EXPECT_EQ(run.seq(c).kv.pages[0], page) << "the fault did not hand the page on";
      return run.RunToEnd();
    }
    case Fault::kLateTransferWrite: {
      // A was receiving a transfer and is cancelled; its pages go to B. The aborted transfer's
      // last page lands late in B's page: another request's KV bytes, then its transfer tag.
      const RequestId a = run.Submit(Prompt(6, 1));
      run.Submit(Prompt(6, 2));
      run.Step();
      const std::vector<kv::PageId> a_pages = run.seq(a).kv.pages;
      run.Cancel(a);
      const RequestId b = run.Submit(Prompt(6, 3));
      run.Step();
      const kv::PageId page = run.seq(b).kv.pages[0];
      EXPECT_NE(std::find(a_pages.begin(), a_pages.end(), page), a_pages.end());
      run.MarkFault(b);
      std::span<uint8_t> bytes = run.pool().PageBytes(page);
      std::memset(bytes.data(), 0x5a, bytes.size());
      run.engine().tracker_for_testing()->StampTransferTag(page, 0x5a5a5a5a);
      break;
    }
    case Fault::kStalePrefixPage: {
      // B adopted the three prompt pages A published; one of them is then freed under the cache
      // and B (the fault) and handed to C.
      const std::vector<int32_t> prompt = Prompt(13, 4);
      const RequestId a = run.Submit(prompt, "t");
      while (run.engine().scheduler().Find(a) != nullptr) run.Step();
      const RequestId b = run.Submit(prompt, "t");
      run.Submit(Prompt(6, 5), "u");
      run.Step();
      EXPECT_EQ(run.seq(b).cached_prompt_tokens, 12u);
      const kv::PageId page = run.seq(b).kv.pages[1];
      run.MarkFault(b);
      run.engine().allocator_for_testing()->InjectFreeWhileMapped(page);
      const RequestId c = run.Submit(Prompt(6, 6), "u");
      run.Step();
      EXPECT_EQ(run.seq(c).kv.pages[0], page) << "the fault did not hand the page on";
      // The tenant's next request is not handed the stale page: it matches only page 0.
      const RequestId d = run.Submit(prompt, "t");
      run.Step();
      EXPECT_EQ(run.seq(d).cached_prompt_tokens, 4u);
      return run.RunToEnd();
    }
  }
  run.RunToEnd();
}

struct Case {
  Fault fault;
  kv::MismatchReason reason;
  bool prefix_cache;
};
const Case kCases[] = {
    {Fault::kSwappedListEntry, kv::MismatchReason::kWrongPage, false},
    {Fault::kFreedAndReallocated, kv::MismatchReason::kGeneration, false},
    {Fault::kLateTransferWrite, kv::MismatchReason::kTransferTag, false},
    {Fault::kStalePrefixPage, kv::MismatchReason::kGeneration, true},
};

void PrintTo(const Case& c, std::ostream* os) { *os << "fault " << static_cast<int>(c.fault); }

class IntegrityAbortTest : public ::testing::TestWithParam<Case> {};

TEST_P(IntegrityAbortTest, AbortsOnlyTheVictimAndNothingReadsAnotherRequestsKv) {
  const Case c = GetParam();
  std::vector<std::string> lines;
  SetLogSink([&](LogLevel, const std::string& line) {
    if (line.find("kv_integrity_abort") != std::string::npos) lines.push_back(line);
  });
  FaultRun run(/*integrity=*/true, c.prefix_cache);
  RunFault(c.fault, run);
  SetLogSink({});

  const RunResult& victim = run.run(run.victim());
  EXPECT_EQ(victim.finish, FinishReason::kAbort);
  EXPECT_EQ(victim.finishes, 1);
  EXPECT_EQ(victim.detail.find(std::string("kv integrity: ") + kv::MismatchReasonName(c.reason)), 0u)
      << victim.detail;
  EXPECT_EQ(run.victim_tokens_after_fault(), 0u);
  EXPECT_EQ(run.victim_reads(), 0u) << "the victim was run after the fault";
  EXPECT_EQ(run.foreign_reads(), 0u) << "a sequence read a page another live request holds";
  EXPECT_EQ(run.OthersThatDifferFromSolo(), std::vector<RequestId>{});
  const EngineStats s = run.engine().Stats();
  std::array<uint64_t, kv::kNumMismatchReasons> want{};
  want[static_cast<size_t>(c.reason)] = 1;
  EXPECT_EQ(s.integrity_aborts, want);
  EXPECT_EQ(s.finished[static_cast<size_t>(FinishReason::kAbort)], 1u);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("request=" + std::to_string(run.victim()) + " "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(std::string("reason=") + kv::MismatchReasonName(c.reason) + " "), std::string::npos)
      << lines[0];
}

TEST_P(IntegrityAbortTest, WithoutIntegrityTheFaultCorruptsARead) {
  const Case c = GetParam();
  FaultRun run(/*integrity=*/false, c.prefix_cache);
  RunFault(c.fault, run);
  EXPECT_NE(run.run(run.victim()).finish, FinishReason::kAbort);
  EXPECT_GT(run.victim_reads(), 0u);
  if (c.fault == Fault::kLateTransferWrite) {
    EXPECT_TRUE(run.VictimDiffersFromSolo()) << "the late write did not change what the victim read";
  } else {
    EXPECT_GT(run.foreign_reads(), 0u) << "the victim never read the page it lost";
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, IntegrityAbortTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           switch (info.param.fault) {
                             case Fault::kSwappedListEntry: return std::string("SwappedListEntry");
                             case Fault::kFreedAndReallocated: return std::string("FreedAndReallocated");
                             case Fault::kLateTransferWrite: return std::string("LateTransferWrite");
                             case Fault::kStalePrefixPage: return std::string("StalePrefixPage");
                           }
                           return std::string("Unknown");
                         });

TEST(IntegrityIncidentLogTest, TokenBucketAllowsABurstThenRefills) {
  TokenBucket bucket(/*per_second=*/10, /*burst=*/3);
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += bucket.Allow(1'000'000'000);
  EXPECT_EQ(allowed, 3);
  EXPECT_FALSE(bucket.Allow(1'050'000'000));  // half a token
  EXPECT_TRUE(bucket.Allow(1'100'000'000));   // one token after 100 ms
  EXPECT_FALSE(bucket.Allow(900'000'000));    // time going backwards refills nothing
  allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += bucket.Allow(61'000'000'000);  // a minute later: full, not 600
  EXPECT_EQ(allowed, 3);
}

TEST(IntegrityIncidentLogTest, SuppressedLinesAreCountedInTheNextOne) {
  std::vector<std::string> lines;
  SetLogSink([&](LogLevel, const std::string& line) { lines.push_back(line); });
  IntegrityIncidentLog log;
  kv::IntegrityIncident incident;
  incident.request = 5;
  incident.reason = kv::MismatchReason::kWrongPage;
  incident.physical_page = 9;
  int logged = 0;
  for (int i = 0; i < 25; ++i) logged += log.Report(incident, 0);
  EXPECT_EQ(logged, static_cast<int>(IntegrityIncidentLog::kBurst));
  EXPECT_EQ(log.suppressed_total(), 5u);
  EXPECT_TRUE(
      log.Report(incident, 1'000'000'000 / static_cast<int64_t>(IntegrityIncidentLog::kLinesPerSecond)));
  SetLogSink({});
  ASSERT_EQ(lines.size(), static_cast<size_t>(IntegrityIncidentLog::kBurst) + 1);
  EXPECT_NE(
      lines.back().find("kv_integrity_abort request=5 logical_page=0 physical_page=9 expected_page=none "
                        "reason=wrong_page "),
      std::string::npos)
      << lines.back();
  EXPECT_NE(lines.back().find(" suppressed=5"), std::string::npos) << lines.back();
  EXPECT_NE(lines.front().find(" suppressed=0"), std::string::npos) << lines.front();
}

TEST(IntegrityAbortLogTest, OneStructuredLinePerAbortRateLimited) {
  FakeClock clock;
  EngineConfig config;
  config.integrity = true;
  config.clock = &clock;
  constexpr int kRequests = 30;
  HashEngine h(2 * kRequests, kPageTokens, config);
  Engine& e = *h.engine;
  std::vector<RequestId> ids;
  for (int i = 0; i < kRequests; ++i)
    ids.push_back(e.Submit(GreedyRequest(Prompt(6, i), kMaxTokens)).value());
  e.Step();
  for (RequestId id : ids) e.tracker_for_testing()->InjectBumpGeneration(e.scheduler().Find(id)->kv.pages[1]);
  std::vector<std::string> lines;
  SetLogSink([&](LogLevel level, const std::string& line) {
    if (line.find("kv_integrity_abort") == std::string::npos) return;
    EXPECT_EQ(level, LogLevel::kError);
    lines.push_back(line);
  });
  e.Step();  // 30 aborts at one instant: the burst is logged, the rest counted as suppressed
  SetLogSink({});
  EXPECT_EQ(e.Stats().integrity_aborts[static_cast<size_t>(kv::MismatchReason::kGeneration)], 30u);
  ASSERT_EQ(lines.size(), static_cast<size_t>(IntegrityIncidentLog::kBurst));
  // Exactly the documented fields, in order, and nothing else (no prompt or output text).
  const std::string& line = lines[0];
  const std::string body = line.substr(line.find("kv_integrity_abort "));
  std::vector<std::string> keys;
  for (size_t pos = body.find(' '); pos != std::string::npos; pos = body.find(' ', pos + 1)) {
    const size_t eq = body.find('=', pos);
    keys.push_back(body.substr(pos + 1, eq - pos - 1));
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"request", "logical_page", "physical_page", "expected_page",
                                            "reason", "expected_generation", "found_generation",
                                            "expected_transfer_tag", "found_transfer_tag", "suppressed"}));
  EXPECT_NE(body.find("request=" + std::to_string(ids[0]) + " logical_page=1 "), std::string::npos) << body;
  EXPECT_NE(body.find(" reason=generation expected_generation=1 found_generation=2 "), std::string::npos)
      << body;
}

TEST(TenantIsolationTest, RequestsWithoutATenantShareNoPrefixPages) {
  EngineConfig config;
  config.prefix_cache = true;
  config.integrity = true;
  HashEngine h(kPages, kPageTokens, config);
  Engine& e = *h.engine;
  const Request anonymous = GreedyRequest(Prompt(13, 7), 4);
  const RunResult first = RunUntilFinished(e, e.Submit(anonymous).value());
  const RunResult second = RunUntilFinished(e, e.Submit(anonymous).value());
  EngineStats s = e.Stats();
  EXPECT_EQ(s.prefix_cache_queries, 0u);
  EXPECT_EQ(s.prefix_cache_hits, 0u);
  EXPECT_EQ(s.prefix_cache_pages, 0u);  // nothing published either
  EXPECT_EQ(first.tokens, HashGreedyReference(anonymous.prompt, 4));
  EXPECT_EQ(second.tokens, first.tokens);
  Request tenant_a = anonymous;
  tenant_a.tenant = "a";
  RunUntilFinished(e, e.Submit(tenant_a).value());
  const RunResult again = RunUntilFinished(e, e.Submit(tenant_a).value());
  s = e.Stats();
  EXPECT_EQ(s.prefix_cache_hits, 1u);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 12u);
  EXPECT_EQ(again.tokens, first.tokens);
}

}  // namespace
}  // namespace tandem::engine::runtime
