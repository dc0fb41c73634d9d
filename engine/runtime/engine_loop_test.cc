// EngineLoop: the step thread and the thread-safe calls around it, over the HashExecutor. Callers
// on several threads submit, cancel and transfer while the loop steps; every request's sink sees
// its tokens in order and exactly one last output; an idle loop blocks until a call or a deadline;
// Stop ends every live request once. Runs under TSan with `scripts/test.sh --tsan`.
#include "engine/runtime/engine_loop.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "engine/runtime/engine_test_util.h"

namespace tandem::engine::runtime {
namespace {

std::vector<int32_t> LoopPrompt(int n, int salt) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    p[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + salt * 13) % kHashVocab);
  return p;
}

// Collects what sinks receive, from the step thread, for the test thread to wait on.
class Collector {
 public:
  EngineLoop::Sink SinkFor(int key) {
    return [this, key](RequestOutput out) {
      std::lock_guard<std::mutex> lock(mu_);
      Run& r = runs_[key];
      r.tokens.insert(r.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finish || out.exported) {
        ++r.last_outputs;
        r.finish = out.finish;
        r.exported = out.exported;
        r.detail = out.finish_detail;
        ++done_;
        cv_.notify_all();
      }
      if (!out.new_tokens.empty()) cv_.notify_all();
    };
  }
  void WaitForDone(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ >= n; });
  }
  void WaitForTokens(int key, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return runs_[key].tokens.size() >= n; });
  }
  struct Run {
    std::vector<int32_t> tokens;
    std::optional<FinishReason> finish;
    bool exported = false;
    std::string detail;
    int last_outputs = 0;
  };
  std::map<int, Run> runs() {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Run> runs_;
  int done_ = 0;
};

TEST(EngineLoopTest, ConcurrentCallersGetTheirOwnTokensOnce) {
  EngineConfig config;
  config.integrity = true;
  config.scheduler.max_batch_tokens = 16;
  HashEngine h(48, 4, config);
  EngineLoop loop(h.engine.get());
  Collector got;
  constexpr int kThreads = 4, kPerThread = 12;
  std::vector<std::thread> callers;
  std::atomic<int> cancelled{0};
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int key = t * kPerThread + i;
        const Request r = GreedyRequest(LoopPrompt(3 + key % 9, key), 4 + key % 7);
        StatusOr<RequestId> id = loop.Submit(r, got.SinkFor(key));
        ASSERT_TRUE(id.ok()) << id.status().ToString();
        if (key % 5 == 0) {  // cancel some: in whatever phase the loop has them
          const Status st = loop.Cancel(*id);
          if (st.ok()) cancelled.fetch_add(1);
        }
        (void)loop.Stats();
      }
    });
  }
  for (std::thread& c : callers) c.join();
  got.WaitForDone(kThreads * kPerThread);
  const auto runs = got.runs();
  int n_cancelled = 0;
  for (int key = 0; key < kThreads * kPerThread; ++key) {
    const Collector::Run& run = runs.at(key);
    EXPECT_EQ(run.last_outputs, 1) << key;
    const Request r = GreedyRequest(LoopPrompt(3 + key % 9, key), 4 + key % 7);
    const std::vector<int32_t> want = HashGreedyReference(r.prompt, static_cast<size_t>(r.params.max_tokens));
    if (run.finish == FinishReason::kCancelled) {
      ++n_cancelled;  // a prefix of its greedy tokens
      EXPECT_EQ(run.tokens, std::vector<int32_t>(want.begin(), want.begin() + run.tokens.size())) << key;
    } else {
      EXPECT_EQ(run.finish, FinishReason::kLength) << key;
      EXPECT_EQ(run.tokens, want) << key;
    }
  }
  EXPECT_EQ(n_cancelled, cancelled.load());
  loop.Stop();
  const EngineStats s = loop.Stats();
  EXPECT_EQ(s.pages_held, 0u);
  EXPECT_EQ(s.running + s.waiting, 0u);
}

TEST(EngineLoopTest, StopEndsEveryLiveRequestOnceAndRefusesLaterCalls) {
  EngineConfig config;
  HashEngine h(4096, 4, config);  // room for every request to keep decoding until Stop
  EngineLoop loop(h.engine.get());
  Collector got;
  for (int key = 0; key < 6; ++key) {
    Request r = GreedyRequest(LoopPrompt(5, key), 100000);
    r.params.ignore_eos = true;
    ASSERT_TRUE(loop.Submit(r, got.SinkFor(key)).ok());
  }
  got.WaitForTokens(5, 2);                  // all of them are decoding by now
  std::thread other([&] { loop.Stop(); });  // two threads stopping at once
  loop.Stop();
  other.join();
  loop.Stop();  // idempotent
  const auto runs = got.runs();
  ASSERT_EQ(runs.size(), 6u);
  for (const auto& [key, run] : runs) {
    EXPECT_EQ(run.last_outputs, 1) << key;
    EXPECT_EQ(run.finish, FinishReason::kAbort) << key;
    EXPECT_NE(run.detail.find("stopping"), std::string::npos) << run.detail;
  }
  EXPECT_EQ(loop.Submit(GreedyRequest({1, 2}, 2), got.SinkFor(99)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(loop.Stats().pages_held, 0u);
}

// A sink may call the loop (it runs inline on the step thread): here it cancels its own request at
// the first token and submits a follow-up, as an HTTP handler reacting to a client would.
TEST(EngineLoopTest, SinksMayCallTheLoop) {
  HashEngine h(64, 4, {});
  EngineLoop loop(h.engine.get());
  Collector got;
  bool acted = false;  // step thread only
  EngineLoop::Sink inner = got.SinkFor(1);
  const RequestId id =
      loop.Submit(GreedyRequest(LoopPrompt(6, 1), 50),
                  [&](RequestOutput out) {
                    const bool first = !out.new_tokens.empty() && !out.finish;
                    inner(out);
                    if (first && !acted) {
                      acted = true;
                      EXPECT_TRUE(loop.Cancel(out.id).ok());
                      EXPECT_TRUE(loop.Submit(GreedyRequest(LoopPrompt(4, 2), 3), got.SinkFor(2)).ok());
                    }
                  })
          .value();
  EXPECT_NE(id, 0u);
  got.WaitForDone(2);
  const auto runs = got.runs();
  EXPECT_EQ(runs.at(1).finish, FinishReason::kCancelled);
  EXPECT_EQ(runs.at(2).finish, FinishReason::kLength);
  EXPECT_EQ(runs.at(2).tokens, HashGreedyReference(LoopPrompt(4, 2), 3));
}

// The whole transfer through two loops, pages written from the caller's thread; then a
// reservation left alone is aborted at its deadline by an idle loop woken for it.
TEST(EngineLoopTest, TransferAcrossLoopsAndDeadlineOfAnIdleLoop) {
  FakeClock clock;
  EngineConfig pconf;
  pconf.role = EngineRole::kPrefillOnly;
  HashEngine prefill(32, 4, pconf);
  EngineConfig dconf;
  dconf.role = EngineRole::kDecodeOnly;
  dconf.clock = &clock;
  dconf.import_timeout_ms = 500;
  HashEngine decode(32, 4, dconf);
  EngineLoop ploop(prefill.engine.get());
  EngineLoop dloop(decode.engine.get());
  Collector got;
  const Request req = GreedyRequest(LoopPrompt(10, 3), 6);
  const ImportReservation r = dloop.ReserveImport(req, got.SinkFor(1)).value();
  const RequestId pid = ploop.Submit(req, got.SinkFor(0)).value();
  got.WaitForTokens(0, 1);
  std::shared_ptr<KvExport> x = ploop.ExportKv(pid, r.layout).value();
  std::vector<uint8_t> page(r.layout.page_bytes);
  for (uint32_t p = 0; p < x->num_pages(); ++p) {
    ASSERT_TRUE(x->NextPage(page).ok());
    ASSERT_TRUE(dloop.WritePage(r.transfer_id, p, page, r.page_tags[p]).ok());
  }
  ASSERT_TRUE(dloop.CommitImport(r.transfer_id, x->first_token(), x->digest()).ok());
  ASSERT_TRUE(ploop.FinishExport(pid, kv::TransferState::kDone).ok());
  got.WaitForDone(2);
  auto runs = got.runs();
  EXPECT_TRUE(runs[0].exported);
  EXPECT_EQ(runs[0].last_outputs, 1);
  std::vector<int32_t> joined = runs[0].tokens;
  joined.insert(joined.end(), runs[1].tokens.begin(), runs[1].tokens.end());
  EXPECT_EQ(joined, HashGreedyReference(req.prompt, 6));
  EXPECT_EQ(runs[1].finish, FinishReason::kLength);

  const ImportReservation idle = dloop.ReserveImport(req, got.SinkFor(2)).value();
  clock.AdvanceMillis(500);
  dloop.Wake();
  got.WaitForDone(3);
  runs = got.runs();
  EXPECT_EQ(runs[2].finish, FinishReason::kAbort);
  EXPECT_NE(runs[2].detail.find("timed out"), std::string::npos);
  std::vector<uint8_t> late(idle.layout.page_bytes);
  EXPECT_EQ(dloop.WritePage(idle.transfer_id, 0, late, idle.page_tags[0]).code(),
            StatusCode::kFailedPrecondition);
  dloop.Stop();
  EXPECT_EQ(dloop.Stats().pages_held, 0u);
  EXPECT_EQ(dloop.Stats().late_transfer_writes, 1u);
}

}  // namespace
}  // namespace tandem::engine::runtime
