// Leader election against kube-sim: two electors in one process, each with its own clients.
// Timing is driven by FakeClocks (no sleeps, no timed assertions): the test advances a clock to
// the moment an elector waits for and then waits for that elector's next attempt to finish.

#include "controller/runtime/leader_election.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "controller/kube/client.h"
#include "controller/kube/testing/kube_sim_process.h"

namespace tandem::controller::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Json = nlohmann::json;

constexpr char kNs[] = "tandem-system";

int64_t Ns(std::chrono::nanoseconds d) { return d.count(); }

// Polls `done` (real time, 1 ms steps) for up to 20 s; true when it became true.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 20'000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return done();
}

// Advances `clock` to the end of `e`'s current wait and waits until it has finished the next
// attempt (started a new wait or returned). REQUIRES: `e` is running.
void Step(FakeClock& clock, LeaderElector& e) {
  LeaderElectionStats before;
  ASSERT_TRUE(Eventually([&] {
    before = e.Stats();
    return before.waits > 0 || e.Done();
  }));
  if (e.Done()) return;
  int64_t delta = before.next_wake_nanos - clock.NowNanos();
  if (delta > 0) clock.AdvanceNanos(delta);
  ASSERT_TRUE(Eventually([&] { return e.Stats().waits > before.waits || e.Done(); }));
}

LeaderElectionConfig Config(const std::string& identity, const Clock* clock) {
  LeaderElectionConfig c;
  c.lease_namespace = kNs;
  c.lease_name = "tandem-controller";
  c.identity = identity;
  c.lease_duration = seconds(15);
  c.renew_deadline = seconds(10);
  c.retry_period = seconds(2);
  c.clock = clock;
  return c;
}

class LeaderElectionTest : public ::testing::Test {
 protected:
  std::unique_ptr<kube::Client> NewClient() {
    auto c = kube::Client::New(sim_->config());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  void StartSim() {
    auto sim = kube::testing::KubeSimProcess::Start();
    if (!sim.ok() && sim.status().code() == StatusCode::kUnavailable) GTEST_SKIP() << sim.status().ToString();
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(sim).value();
    auto admin = NewClient();
    ASSERT_NE(admin, nullptr);
    Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}};
    auto created = admin->Create(kube::kNamespace, "", ns);
    ASSERT_TRUE(created.ok() || created.status().code() == StatusCode::kAlreadyExists)
        << created.status().ToString();
  }
  Json Lease() {
    auto admin = NewClient();
    auto got = admin->Get(kube::kLease, kNs, "tandem-controller");
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : Json();
  }
  static Json ConfigMap(const std::string& name) {
    return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}, {"namespace", kNs}}}};
  }

  std::unique_ptr<kube::testing::KubeSimProcess> sim_;
};

TEST(LeaderElectionConfigTest, RejectsBadTimingAndMissingNames) {
  LeaderElectionConfig c = Config("a", nullptr);
  EXPECT_TRUE(ValidateLeaderElectionConfig(c).ok());
  c.renew_deadline = seconds(15);  // == lease duration
  EXPECT_EQ(ValidateLeaderElectionConfig(c).code(), StatusCode::kInvalidArgument);
  c = Config("a", nullptr);
  c.retry_period = seconds(10);  // == renew deadline
  EXPECT_EQ(ValidateLeaderElectionConfig(c).code(), StatusCode::kInvalidArgument);
  c = Config("a", nullptr);
  c.lease_duration = milliseconds(15'500);  // the Lease holds whole seconds only
  EXPECT_EQ(ValidateLeaderElectionConfig(c).code(), StatusCode::kInvalidArgument);
  c = Config("", nullptr);
  EXPECT_EQ(ValidateLeaderElectionConfig(c).code(), StatusCode::kInvalidArgument);
  c = Config("a", nullptr);
  c.lease_name.clear();
  EXPECT_EQ(ValidateLeaderElectionConfig(c).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LeaderElector::New(nullptr, Config("a", nullptr)).status().code(), StatusCode::kInvalidArgument);
}

// One leads; the other waits. Killing the leader (no release) lets the other take over after the
// lease expires as the survivor observed it: within lease duration + retry period of the kill.
TEST_F(LeaderElectionTest, KilledLeaderIsReplacedWithinLeaseDurationPlusRetryPeriod) {
  StartSim();
  if (IsSkipped()) return;
  FakeClock clock(1'000'000'000);
  auto lease_a = NewClient(), lease_b = NewClient();
  std::atomic<int> started_a{0}, stopped_a{0}, started_b{0};
  std::string new_leader_seen_by_b;
  LeaderElectionConfig ca = Config("a", &clock);
  ca.release_on_cancel = false;  // a crash releases nothing
  ca.on_started_leading = [&] { ++started_a; };
  ca.on_stopped_leading = [&] { ++stopped_a; };
  LeaderElectionConfig cb = Config("b", &clock);
  cb.on_started_leading = [&] { ++started_b; };
  cb.on_new_leader = [&](const std::string& id) { new_leader_seen_by_b = id; };
  auto a = LeaderElector::New(lease_a.get(), ca).value();
  auto b = LeaderElector::New(lease_b.get(), cb).value();

  a->Start();
  ASSERT_TRUE(Eventually([&] { return a->IsLeader(); }));
  b->Start();
  // Several renew rounds: A keeps the lease, B never leads.
  for (int i = 0; i < 12; ++i) {
    Step(clock, *b);
    Step(clock, *a);
    ASSERT_TRUE(a->IsLeader()) << "round " << i;
    ASSERT_FALSE(b->IsLeader()) << "round " << i;
  }
  EXPECT_EQ(new_leader_seen_by_b, "a");
  EXPECT_GE(a->Stats().renewals, 5);
  Json lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);

  a->Stop();  // the "kill": A stops renewing and does not release
  EXPECT_EQ(stopped_a.load(), 1);
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "a");
  int64_t killed_at = clock.NowNanos();
  while (!b->IsLeader()) {
    Step(clock, *b);
    ASSERT_LE(clock.NowNanos() - killed_at, Ns(seconds(17) + seconds(2))) << "B never took over";
  }
  int64_t takeover_ns = clock.NowNanos() - killed_at;
  EXPECT_LE(takeover_ns, Ns(seconds(15) + seconds(2)));
  EXPECT_GE(takeover_ns, Ns(seconds(15) - seconds(2)));  // not before the lease could expire
  EXPECT_EQ(started_b.load(), 1);
  EXPECT_EQ(started_a.load(), 1);
  lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(new_leader_seen_by_b, "b");
  std::printf("takeover after kill: %.1f s of lease-clock time (lease 15 s, retry 2 s)\n",
              takeover_ns * 1e-9);
  b->Stop();
}

// A clean stop with release_on_cancel clears the holder: the other takes over at its next attempt.
TEST_F(LeaderElectionTest, ReleaseOnCancelHandsOverAtTheNextAttempt) {
  StartSim();
  if (IsSkipped()) return;
  FakeClock clock(1'000'000'000);
  auto lease_a = NewClient(), lease_b = NewClient();
  auto a = LeaderElector::New(lease_a.get(), Config("a", &clock)).value();
  auto b = LeaderElector::New(lease_b.get(), Config("b", &clock)).value();
  a->Start();
  ASSERT_TRUE(Eventually([&] { return a->IsLeader(); }));
  b->Start();
  Step(clock, *b);
  ASSERT_FALSE(b->IsLeader());
  a->Stop();
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "");
  int64_t stopped_at = clock.NowNanos();
  while (!b->IsLeader()) {
    Step(clock, *b);
    ASSERT_LE(clock.NowNanos() - stopped_at, Ns(seconds(4))) << "B never took over";
  }
  EXPECT_LE(clock.NowNanos() - stopped_at, Ns(seconds(2)));
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "b");
  b->Stop();
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "");
}

// A leader that stalls (its clock stops: a long pause or a partition) is replaced; when it
// resumes, the write fence refuses every write at once, before its own loop notices the loss.
TEST_F(LeaderElectionTest, DeposedLeaderWritesNothingAfterLosingTheLease) {
  StartSim();
  if (IsSkipped()) return;
  FakeClock clock_a(1'000'000'000), clock_b(7'000'000'000);  // separate machines, separate clocks
  auto lease_a = NewClient(), lease_b = NewClient(), writes_a = NewClient(), writes_b = NewClient();
  std::atomic<int> stopped_a{0};
  LeaderElectionConfig ca = Config("a", &clock_a);
  ca.on_stopped_leading = [&] { ++stopped_a; };
  auto a = LeaderElector::New(lease_a.get(), ca).value();
  auto b = LeaderElector::New(lease_b.get(), Config("b", &clock_b)).value();
  EXPECT_EQ(a->InstallWriteFence(lease_a.get()).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(a->InstallWriteFence(writes_a.get()).ok());
  ASSERT_TRUE(b->InstallWriteFence(writes_b.get()).ok());

  // Not leading yet: fenced.
  auto early = writes_a->Create(kube::kConfigMap, kNs, ConfigMap("a-early"));
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  a->Start();
  ASSERT_TRUE(Eventually([&] { return a->IsLeader(); }));
  ASSERT_TRUE(writes_a->Create(kube::kConfigMap, kNs, ConfigMap("a-while-leading")).ok());
  b->Start();
  // A stalls: clock_a stands still, so A neither renews nor notices anything. B waits out the lease.
  while (!b->IsLeader()) {
    Step(clock_b, *b);
    ASSERT_FALSE(a->Done());
  }
  EXPECT_TRUE(writes_b->Create(kube::kConfigMap, kNs, ConfigMap("b-leading")).ok());
  // A resumes after the pause: its clock jumped past the renew deadline.
  clock_a.AdvanceNanos(Ns(seconds(20)));
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    auto w = writes_a->Create(kube::kConfigMap, kNs, ConfigMap("a-after-" + std::to_string(i)));
    if (w.status().code() == StatusCode::kFailedPrecondition) ++refused;
    EXPECT_FALSE(w.ok()) << "a-after-" << i << " was written";
    auto p = writes_a->Patch(kube::kConfigMap, kNs, "a-while-leading", Json{{"data", {{"k", "v"}}}});
    if (p.status().code() == StatusCode::kFailedPrecondition) ++refused;
  }
  EXPECT_EQ(refused, 10);
  ASSERT_TRUE(Eventually([&] { return a->Done(); }));  // its loop saw the deadline pass
  EXPECT_EQ(stopped_a.load(), 1);
  EXPECT_FALSE(a->IsLeader());
  EXPECT_TRUE(b->IsLeader());

  // What reached the server from A after the loss: nothing.
  auto admin = NewClient();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(admin->Get(kube::kConfigMap, kNs, "a-after-" + std::to_string(i)).status().code(),
              StatusCode::kNotFound);
  }
  auto kept = admin->Get(kube::kConfigMap, kNs, "a-while-leading");
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->contains("data"));
  kube::RequestCounts counts = writes_a->Counts();
  EXPECT_EQ(counts.by_verb["create"], 1u);  // only the write made while leading was sent
  EXPECT_EQ(counts.by_verb.count("patch"), 0u);
  EXPECT_EQ(counts.fenced, 11u);  // a-early + the ten above
  EXPECT_EQ(a->Stats().fenced_writes, 11);
  std::printf("deposed leader: %d writes attempted after losing the lease, 0 sent\n", refused);
  // The fence outlives the elector and stays shut.
  a.reset();
  EXPECT_EQ(writes_a->Create(kube::kConfigMap, kNs, ConfigMap("a-gone")).status().code(),
            StatusCode::kFailedPrecondition);
  b->Stop();
}

// Real clock, short timings: the survivor takes over after a kill. Prints the measured time; the
// assertion is only that it happens (a loaded machine may be slow).
TEST_F(LeaderElectionTest, RealClockTakeover) {
  StartSim();
  if (IsSkipped()) return;
  auto lease_a = NewClient(), lease_b = NewClient();
  auto real = [](const std::string& id, bool release) {
    LeaderElectionConfig c = Config(id, nullptr);
    c.lease_duration = seconds(1);
    c.renew_deadline = milliseconds(600);
    c.retry_period = milliseconds(100);
    c.release_on_cancel = release;
    return c;
  };
  auto a = LeaderElector::New(lease_a.get(), real("a", false)).value();
  auto b = LeaderElector::New(lease_b.get(), real("b", false)).value();
  a->Start();
  ASSERT_TRUE(Eventually([&] { return a->IsLeader(); }));
  b->Start();
  ASSERT_TRUE(Eventually([&] { return b->Stats().attempts >= 3; }));
  EXPECT_FALSE(b->IsLeader());
  auto killed = std::chrono::steady_clock::now();
  a->Stop();
  ASSERT_TRUE(Eventually([&] { return b->IsLeader(); }));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("real-clock takeover after kill: %.3f s (lease 1 s, retry 0.1 s)\n", took);
  b->Stop();
}

}  // namespace
}  // namespace tandem::controller::runtime
