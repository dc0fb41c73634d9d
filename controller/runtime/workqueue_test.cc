#include "controller/runtime/workqueue.h"

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

namespace tandem::controller::runtime {
namespace {

using std::chrono::milliseconds;

TEST(WorkQueue, AddDeduplicatesQueuedKeys) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  q.Add("ns/a");
  q.Add("ns/a");
  q.Add("ns/b");
  q.Add("ns/a");
  EXPECT_EQ(q.Len(), 2);
  EXPECT_EQ(q.TryGet(), "ns/a");  // FIFO by first add
  EXPECT_EQ(q.TryGet(), "ns/b");
  EXPECT_EQ(q.TryGet(), std::nullopt);
  EXPECT_EQ(q.Stats().adds, 4);
}

TEST(WorkQueue, ProcessingKeyIsNotHandedOutTwiceAndIsRequeuedAfterDone) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  q.Add("a");
  ASSERT_EQ(q.TryGet(), "a");
  q.Add("a");  // while processing: dirty, not queued
  q.Add("a");
  EXPECT_EQ(q.Len(), 0);
  EXPECT_EQ(q.TryGet(), std::nullopt);
  EXPECT_EQ(q.Stats().processing, 1);
  q.Done("a");
  EXPECT_EQ(q.Len(), 1);  // re-queued once
  EXPECT_EQ(q.TryGet(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0);  // not dirty any more
  EXPECT_EQ(q.Stats().processing, 0);
}

TEST(WorkQueue, DoneWithoutReAddDoesNotRequeue) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  q.Add("a");
  ASSERT_EQ(q.TryGet(), "a");
  q.Done("a");
  q.Done("never-got");  // harmless
  EXPECT_EQ(q.Len(), 0);
}

TEST(WorkQueue, AddAfterWaitsForTheClockAndKeepsTheEarliestDelay) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  q.AddAfter("a", milliseconds(100));
  q.AddAfter("a", milliseconds(50));   // earlier wins
  q.AddAfter("a", milliseconds(500));  // later is ignored
  q.AddAfter("b", milliseconds(0));    // immediate
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.TryGet(), "b");
  EXPECT_EQ(q.Stats().waiting, 1);
  clock.AdvanceMillis(49);
  EXPECT_EQ(q.Len(), 0);
  clock.AdvanceMillis(1);
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.TryGet(), "a");
  q.Done("a");
  clock.AdvanceMillis(1000);  // the stale 100 ms / 500 ms entries must not re-add it
  EXPECT_EQ(q.Len(), 0);
  EXPECT_EQ(q.Stats().waiting, 0);
}

TEST(WorkQueue, DelayedKeyAlreadyQueuedIsNotDuplicated) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  q.Add("a");
  q.AddAfter("a", milliseconds(10));
  clock.AdvanceMillis(10);
  EXPECT_EQ(q.Len(), 1);
}

TEST(WorkQueue, AddRateLimitedFollowsTheBackoffAndForgetResetsIt) {
  FakeClock clock;
  WorkQueue q(
      "t", clock,
      std::make_unique<ItemExponentialFailureRateLimiter>(milliseconds(5), std::chrono::seconds(1000)));
  int64_t waited_ms = 0;
  for (int64_t want_ms : {5, 10, 20, 40}) {
    q.AddRateLimited("a");
    clock.AdvanceMillis(want_ms - 1);
    ASSERT_EQ(q.TryGet(), std::nullopt) << want_ms;
    clock.AdvanceMillis(1);
    ASSERT_EQ(q.TryGet(), "a") << want_ms;
    q.Done("a");
    waited_ms += want_ms;
  }
  EXPECT_EQ(waited_ms, 75);
  EXPECT_EQ(q.NumRequeues("a"), 4);
  EXPECT_EQ(q.Stats().retries, 4);
  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
  q.AddRateLimited("a");
  clock.AdvanceMillis(5);
  EXPECT_EQ(q.TryGet(), "a");
}

TEST(WorkQueue, ShutDownWakesBlockedGetAndDrainsQueuedKeys) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  std::optional<std::string> got = "unset";
  std::thread waiter([&] { got = q.Get(); });
  q.ShutDown();
  waiter.join();
  EXPECT_EQ(got, std::nullopt);

  WorkQueue q2("t2", clock, nullptr);
  q2.Add("a");
  q2.AddAfter("later", milliseconds(5));
  q2.ShutDown();
  q2.Add("b");  // ignored after shutdown
  EXPECT_TRUE(q2.ShuttingDown());
  EXPECT_EQ(q2.Get(), "a");  // queued keys still drain
  clock.AdvanceMillis(10);
  EXPECT_EQ(q2.Get(), std::nullopt);  // held-back keys were dropped
}

TEST(WorkQueue, BlockedGetSeesADelayedKeyOnceTheFakeClockPasses) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  q.AddAfter("a", std::chrono::seconds(30));
  std::optional<std::string> got;
  std::thread waiter([&] { got = q.Get(); });
  clock.AdvanceMillis(30'000);
  waiter.join();  // wakes within kMaxRealWait of real time
  EXPECT_EQ(got, "a");
}

TEST(WorkQueue, MetricHooksSeeDepthAddsRetriesAndLatency) {
  FakeClock clock;
  std::vector<int64_t> depths;
  int adds = 0, retries = 0;
  std::vector<double> latencies, durations;
  WorkQueueMetricsHooks hooks;
  hooks.on_depth = [&](int64_t d) { depths.push_back(d); };
  hooks.on_add = [&] { ++adds; };
  hooks.on_retry = [&] { ++retries; };
  hooks.on_queue_latency = [&](double s) { latencies.push_back(s); };
  hooks.on_work_duration = [&](double s) { durations.push_back(s); };
  WorkQueue q("t", clock, nullptr, hooks);
  q.Add("a");
  q.Add("b");
  clock.AdvanceMillis(250);
  ASSERT_EQ(q.TryGet(), "a");
  clock.AdvanceMillis(500);
  q.Done("a");
  q.AddRateLimited("c");  // no limiter: added at once
  EXPECT_EQ(depths, (std::vector<int64_t>{1, 2, 1, 2}));
  EXPECT_EQ(adds, 3);
  EXPECT_EQ(retries, 1);
  ASSERT_EQ(latencies.size(), 1u);
  EXPECT_DOUBLE_EQ(latencies[0], 0.25);
  ASSERT_EQ(durations.size(), 1u);
  EXPECT_DOUBLE_EQ(durations[0], 0.5);
}

// Many producers and workers: every key added is processed, never by two workers at once, and a
// key added while it is processed is processed again afterwards.
TEST(WorkQueue, ManyThreadsNeverProcessAKeyConcurrently) {
  FakeClock clock;
  WorkQueue q("t", clock, nullptr);
  constexpr int kKeys = 20, kProducers = 4, kWorkers = 4, kAddsPerProducer = 2000;
  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> processed_after_last_add;  // guarded by mu
  std::atomic<bool> overlap{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!in_flight.insert(*key).second) overlap = true;
          processed_after_last_add[*key] = 1;
        }
        std::this_thread::yield();
        {
          std::lock_guard<std::mutex> lock(mu);
          in_flight.erase(*key);
        }
        q.Done(*key);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        std::string key = "ns/k" + std::to_string((i * 7 + p) % kKeys);
        {
          std::lock_guard<std::mutex> lock(mu);
          processed_after_last_add[key] = 0;
        }
        q.Add(key);
      }
    });
  }
  for (auto& t : producers) t.join();
  // Wait until every key added has been processed after its last add.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      bool all = processed_after_last_add.size() == kKeys;
      for (auto& [k, v] : processed_after_last_add) all = all && v == 1 && !in_flight.count(k);
      if (all && q.Len() == 0 && q.Stats().processing == 0) break;
    }
    std::this_thread::yield();
  }
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_EQ(q.Stats().adds, kProducers * kAddsPerProducer);
}

}  // namespace
}  // namespace tandem::controller::runtime
