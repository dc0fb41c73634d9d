// Admission: slots, per-tenant queues, weighted fair hand-off, caps, refusals.

#include "agent/admission.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::agent {
namespace {

using Ticket = Admission::Ticket;

// Acquire on another thread (it may wait).
std::future<StatusOr<Ticket>> Later(Admission& a, std::string tenant) {
  return std::async(std::launch::async, [&a, tenant] { return a.Acquire(tenant); });
}

// Waits until `n` requests are queued.
void WaitQueued(const Admission& a, int64_t n) {
  for (int i = 0; i < 500 && a.counters().queued != n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(a.counters().queued, n);
}

TEST(AdmissionTest, SlotsThenTheQueueThenTheNextFreedSlot) {
  AdmissionOptions o;
  o.max_inflight = 2;
  Admission a(o);
  StatusOr<Ticket> t1 = a.Acquire("a"), t2 = a.Acquire("a");
  ASSERT_TRUE(t1.ok() && t2.ok());
  auto waiting = Later(a, "a");
  WaitQueued(a, 1);
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  t1->Release();
  StatusOr<Ticket> t3 = waiting.get();
  ASSERT_TRUE(t3.ok());
  EXPECT_EQ(a.counters().in_flight, 2);
  EXPECT_EQ(a.held("a"), 2);
}

// A tenant that arrives while another holds every slot gets the next freed one, ahead of the
// first tenant's earlier waiters.
TEST(AdmissionTest, ABurstingTenantDoesNotStarveAnother) {
  AdmissionOptions o;
  o.max_inflight = 4;
  Admission a(o);
  std::vector<Ticket> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::move(a.Acquire("burst").value()));
  std::vector<std::future<StatusOr<Ticket>>> burst_waiters;
  for (int i = 0; i < 3; ++i) burst_waiters.push_back(Later(a, "burst"));
  WaitQueued(a, 3);
  auto quiet = Later(a, "quiet");
  WaitQueued(a, 4);
  held[0].Release();
  StatusOr<Ticket> q = quiet.get();
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(a.held("quiet"), 1);
  EXPECT_EQ(a.counters().queued, 3);  // the burst's waiters still wait
  for (size_t i = 1; i < held.size(); ++i) held[i].Release();
  for (auto& w : burst_waiters) EXPECT_TRUE(w.get().ok());
}

// With both tenants always waiting, freed slots split 2:1 by weight.
TEST(AdmissionTest, FreedSlotsFollowTheWeights) {
  AdmissionOptions o;
  o.max_inflight = 6;
  o.max_queued_per_tenant = 100;
  o.weights = {{"gold", 2}};
  Admission a(o);
  std::vector<Ticket> first;
  for (int i = 0; i < 6; ++i) first.push_back(std::move(a.Acquire("filler").value()));
  std::vector<std::future<StatusOr<Ticket>>> waiters;
  for (int i = 0; i < 6; ++i) {
    waiters.push_back(Later(a, "gold"));
    waiters.push_back(Later(a, "bronze"));
  }
  WaitQueued(a, 12);
  first.clear();  // six slots free up one by one
  for (int i = 0; i < 500 && a.counters().in_flight < 6; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(a.held("gold"), 4);
  EXPECT_EQ(a.held("bronze"), 2);
  // Drain: each finished waiter's ticket is dropped at once, freeing its slot for the rest (a
  // granted ticket lives in its future until taken).
  size_t done = 0;
  for (int round = 0; round < 5000 && done < waiters.size(); ++round) {
    for (auto& w : waiters) {
      if (w.valid() && w.wait_for(std::chrono::milliseconds(1)) == std::future_status::ready) {
        EXPECT_TRUE(w.get().ok());
        ++done;
      }
    }
  }
  EXPECT_EQ(done, waiters.size());
}

// A tenant at its cap waits even with free slots; another tenant uses them at once.
TEST(AdmissionTest, ATenantCapKeepsRoomForOthers) {
  AdmissionOptions o;
  o.max_inflight = 4;
  o.tenant_max_inflight = 2;
  o.queue_timeout_ms = 100;
  Admission a(o);
  StatusOr<Ticket> a1 = a.Acquire("a"), a2 = a.Acquire("a");
  ASSERT_TRUE(a1.ok() && a2.ok());
  StatusOr<Ticket> a3 = a.Acquire("a");  // waits 100 ms, then 429
  EXPECT_EQ(a3.status().code(), StatusCode::kResourceExhausted);
  StatusOr<Ticket> b1 = a.Acquire("b"), b2 = a.Acquire("b");
  EXPECT_TRUE(b1.ok() && b2.ok());
  EXPECT_EQ(a.counters().timed_out, 1u);
}

TEST(AdmissionTest, AFullQueueRefusesAtOnceAndALeavingClientIsCancelled) {
  AdmissionOptions o;
  o.max_inflight = 1;
  o.max_queued_per_tenant = 1;
  Admission a(o);
  StatusOr<Ticket> t = a.Acquire("a");
  ASSERT_TRUE(t.ok());
  std::atomic<bool> gone{false};
  auto waiter = std::async(std::launch::async, [&] { return a.Acquire("a", [&] { return gone.load(); }); });
  WaitQueued(a, 1);
  const auto start = std::chrono::steady_clock::now();
  StatusOr<Ticket> refused = a.Acquire("a");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));  // no wait
  EXPECT_EQ(a.counters().queue_full, 1u);
  gone = true;
  EXPECT_EQ(waiter.get().status().code(), StatusCode::kCancelled);
  EXPECT_EQ(a.counters().queued, 0);
  t->Release();
  EXPECT_EQ(a.counters().in_flight, 0);
}

// Many threads of one tenant hammer a small pool while another tenant sends one request at a
// time: the excess of the first is shed with 429s, the second is never refused, and no slot leaks.
TEST(AdmissionTest, ExcessIsShedWhileAnotherTenantIsServed) {
  AdmissionOptions o;
  o.max_inflight = 4;
  o.max_queued_per_tenant = 4;
  o.queue_timeout_ms = 2'000;
  Admission a(o);
  std::atomic<bool> stop{false};
  std::atomic<int> shed{0}, burst_served{0};
  std::vector<std::thread> burst;
  for (int i = 0; i < 16; ++i) {
    burst.emplace_back([&] {
      while (!stop) {
        StatusOr<Ticket> t = a.Acquire("burst");
        if (!t.ok()) {
          ++shed;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        ++burst_served;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  int quiet_served = 0;
  for (int i = 0; i < 40; ++i) {
    StatusOr<Ticket> t = a.Acquire("quiet");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ++quiet_served;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (std::thread& t : burst) t.join();
  EXPECT_EQ(quiet_served, 40);
  EXPECT_GT(shed.load(), 0);
  EXPECT_GT(burst_served.load(), 0);
  EXPECT_EQ(a.counters().in_flight, 0);
  EXPECT_EQ(a.counters().queued, 0);
}

}  // namespace
}  // namespace tandem::agent
