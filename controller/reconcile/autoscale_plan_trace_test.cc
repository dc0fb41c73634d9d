#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "controller/reconcile/autoscale_plan.h"

// PlanAutoscale driven by load traces through a simulated pool: ramp up, plateau, burst, ramp
// down, oscillation, the Pending guard, the GPU budget, min/max. Single decisions:
// autoscale_plan_test.cc.

namespace tandem::controller::reconcile {
namespace {

constexpr double kPi = 3.14159265358979323846;

AutoscalePolicy Policy(int64_t min_replicas = 1, int64_t max_replicas = 10) {
  AutoscalePolicy p;
  p.enabled = true;
  p.min_replicas = min_replicas;
  p.max_replicas = max_replicas;
  return p;
}

// A pool under load. `demand` is in replicas' worth at the targets: demand 4 keeps 4 ready decode
// replicas at exactly the KV target, and a queue builds once the caches are full. Pods turn Ready
// startup_seconds after they are asked for; pods past `schedulable` never schedule.
class PoolSim {
 public:
  struct Point {
    double time;
    int64_t replicas;
    ScaleDirection direction;
    std::string reason;
  };

  PoolSim(AutoscalePolicy policy, int64_t replicas, AutoscaleRole role = AutoscaleRole::kDecode)
      : policy_(policy), role_(role), ready_at_(replicas, -1e9) {}

  double startup_seconds = 60;
  size_t schedulable = 1000;
  std::optional<int64_t> gpu_budget;
  int64_t gpus_per_replica = 8;

  int64_t replicas() const { return static_cast<int64_t>(ready_at_.size()); }
  const std::vector<Point>& trace() const { return trace_; }

  AutoscaleDecision Step(double now, double demand) {
    AutoscaleInput in;
    in.policy = policy_;
    in.role = role_;
    in.replicas = replicas();
    for (size_t i = 0; i < ready_at_.size(); ++i) in.ready_replicas += i < schedulable && ready_at_[i] <= now;
    in.pending_replicas = in.replicas - in.ready_replicas;
    in.unschedulable = ready_at_.size() > schedulable;
    if (in.ready_replicas > 0) {
      const double ready = static_cast<double>(in.ready_replicas);
      const double held = demand * policy_.target_kv_cache_usage;  // in caches' worth
      in.signals.kv_cache_usage = std::min(1.0, held / ready);
      in.signals.waiting_requests = std::max(0.0, held - ready) * 16;
      in.signals.waiting_prefill_tokens =
          demand * static_cast<double>(policy_.target_waiting_prefill_tokens_per_replica);
    }
    in.gpu_budget = gpu_budget;
    in.gpus_per_replica = gpus_per_replica;
    in.now_seconds = now;
    in.history = std::move(history_);
    AutoscaleDecision d = PlanAutoscale(in);

    // Invariants of every decision.
    EXPECT_GE(d.replicas, policy_.min_replicas) << now;
    EXPECT_LE(d.replicas, policy_.max_replicas) << now;
    if (d.direction == ScaleDirection::kUp) {
      EXPECT_EQ(in.pending_replicas, 0) << "scaled up at " << now << " with pods not Ready";
      EXPECT_FALSE(in.unschedulable) << now;
    }
    if (gpu_budget && d.direction == ScaleDirection::kUp) {
      EXPECT_LE(d.replicas * gpus_per_replica, *gpu_budget) << now;
    }
    if (d.direction == ScaleDirection::kDown) {
      EXPECT_GE(d.replicas, in.replicas - policy_.max_scale_down_step) << now;
    }

    while (replicas() < d.replicas) ready_at_.push_back(now + startup_seconds);
    while (replicas() > d.replicas) ready_at_.pop_back();  // the StatefulSet drops the highest ordinal
    history_ = d.history;
    trace_.push_back({now, d.replicas, d.direction, d.reason});
    return d;
  }

  // One decision every 15 s over [from, to).
  void Run(double from, double to, const std::function<double(double)>& demand) {
    for (double t = from; t < to; t += 15) Step(t, demand(t));
  }

  // The replica counts visited, in order, repeats dropped.
  std::vector<int64_t> Visited() const {
    std::vector<int64_t> out = {trace_.empty() ? 0 : trace_.front().replicas};
    for (const Point& p : trace_) {
      if (p.replicas != out.back()) out.push_back(p.replicas);
    }
    return out;
  }

  // Times at which the pool moved the other way from its previous move.
  std::vector<std::pair<double, ScaleDirection>> Reversals() const {
    std::vector<std::pair<double, ScaleDirection>> out;
    ScaleDirection last = ScaleDirection::kHold;
    for (const Point& p : trace_) {
      if (p.direction == ScaleDirection::kHold) continue;
      if (last != ScaleDirection::kHold && p.direction != last) out.push_back({p.time, p.direction});
      last = p.direction;
    }
    return out;
  }

  // The time of the last move in `direction` strictly before `t`.
  double LastMove(ScaleDirection direction, double t) const {
    double at = -1e18;
    for (const Point& p : trace_) {
      if (p.time < t && p.direction == direction) at = p.time;
    }
    return at;
  }

 private:
  AutoscalePolicy policy_;
  AutoscaleRole role_;
  std::vector<double> ready_at_;  // per pod, by ordinal: when it turns Ready
  AutoscaleHistory history_;
  std::vector<Point> trace_;
};

using Trajectory = std::vector<int64_t>;

TEST(PlanAutoscaleTrace, RampUpAddsAReplicaAtATime) {
  PoolSim pool(Policy(2, 10), 2);
  pool.Run(0, 2400, [](double t) { return 2 + 6 * std::min(t, 1200.0) / 1200; });  // 2 -> 8 over 20 min
  EXPECT_EQ(pool.Visited(), (Trajectory{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(pool.Reversals().empty());
}

TEST(PlanAutoscaleTrace, PlateauWithNoiseInsideTheToleranceNeverMoves) {
  PoolSim pool(Policy(1, 10), 4);
  pool.Run(0, 4 * 3600, [](double t) { return 4 * (1 + 0.07 * std::sin(t / 37.0) * std::cos(t / 11.0)); });
  EXPECT_EQ(pool.Visited(), (Trajectory{4}));
}

TEST(PlanAutoscaleTrace, BurstScalesUpInStepsAndDrainsOneAtATimeAfterTheDownWindow) {
  PoolSim pool(Policy(2, 10), 2);
  pool.Run(0, 3600, [](double t) { return t >= 300 && t < 1500 ? 9.0 : 2.0; });
  // The full caches and the queue ask for 11 at once: +4 (maxScaleUpStep), then, once the new pods
  // are Ready, what is still short.
  EXPECT_EQ(pool.Visited(), (Trajectory{2, 6, 8, 9, 8, 7, 6, 5, 4, 3, 2}));
  double first_up = 0, first_down = 0;
  for (const PoolSim::Point& p : pool.trace()) {
    if (p.direction == ScaleDirection::kUp && first_up == 0) first_up = p.time;
    if (p.direction == ScaleDirection::kDown && first_down == 0) first_down = p.time;
  }
  // A window of W seconds holds the readings of (now - W, now]: the last reading before the change
  // (one period, 15 s, earlier) leaves it W - 15 s after the change.
  EXPECT_EQ(first_up, 300 + 30 - 15);
  EXPECT_EQ(first_down, 1500 + 300 - 15);
  EXPECT_EQ(pool.Reversals().size(), 1u);
}

TEST(PlanAutoscaleTrace, RampDownDrainsOneAtATimeAndNeverBouncesBack) {
  PoolSim pool(Policy(2, 10), 8);
  pool.Run(0, 3000, [](double t) { return 8 - 7 * std::min(t, 1400.0) / 1400; });  // 8 -> 1, below min
  EXPECT_EQ(pool.Visited(), (Trajectory{8, 7, 6, 5, 4, 3, 2}));
  EXPECT_TRUE(pool.Reversals().empty());
  EXPECT_EQ(pool.trace().back().reason, "AtMin");
}

// The property the windows exist for: after a move, the other direction waits its own window
// (so with equal windows W the pool changes direction at most once in any W seconds, [t, t + W)).
void ExpectReversalsSpaced(const PoolSim& pool, const AutoscalePolicy& p) {
  for (const auto& [t, direction] : pool.Reversals()) {
    if (direction == ScaleDirection::kDown) {
      EXPECT_GE(t - pool.LastMove(ScaleDirection::kUp, t), static_cast<double>(p.scale_down_delay_seconds))
          << t;
    } else {
      EXPECT_GE(t - pool.LastMove(ScaleDirection::kDown, t), static_cast<double>(p.scale_up_delay_seconds))
          << t;
    }
  }
}

struct Oscillation {
  const char* name;
  double period_seconds;
  double amplitude;  // relative to the mean demand of 4
  int64_t up_window, down_window;
  bool square;           // a square wave instead of a sine
  size_t min_reversals;  // the load does push the pool both ways
};

void PrintTo(const Oscillation& o, std::ostream* os) { *os << o.name; }

class PlanAutoscaleOscillation : public testing::TestWithParam<Oscillation> {};

TEST_P(PlanAutoscaleOscillation, ChangesDirectionAtMostOncePerWindow) {
  const Oscillation& o = GetParam();
  AutoscalePolicy policy = Policy(1, 10);
  policy.scale_up_delay_seconds = o.up_window;
  policy.scale_down_delay_seconds = o.down_window;
  PoolSim pool(policy, 4);
  pool.startup_seconds = 45;
  pool.Run(0, 8 * 3600, [&](double t) {
    const double wave = o.square
                            ? (static_cast<int64_t>(std::floor(2 * t / o.period_seconds)) % 2 == 0 ? 1 : -1)
                            : std::sin(2 * kPi * t / o.period_seconds);
    return 4 * (1 + o.amplitude * wave);
  });
  ExpectReversalsSpaced(pool, policy);
  EXPECT_GE(pool.Reversals().size(), o.min_reversals);
  if (o.up_window == o.down_window) {
    const auto r = pool.Reversals();
    for (size_t i = 1; i < r.size(); ++i) EXPECT_GE(r[i].first - r[i - 1].first, o.up_window);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, PlanAutoscaleOscillation,
                         testing::Values(Oscillation{"SlowSine", 1800, 0.4, 30, 300, false, 2},
                                         Oscillation{"FastSine", 300, 0.4, 30, 300, false, 0},
                                         Oscillation{"SquareEvery15s", 30, 0.6, 30, 300, true, 0},
                                         Oscillation{"SquareEqualWindows", 600, 0.5, 120, 120, true, 2},
                                         Oscillation{"SineEqualWindows", 900, 0.4, 120, 120, false, 2}),
                         [](const testing::TestParamInfo<Oscillation>& info) {
                           return std::string(info.param.name);
                         });

TEST(PlanAutoscaleTrace, PendingPodsHoldTheNextScaleUpUntilTheyAreReady) {
  PoolSim pool(Policy(1, 20), 2);
  pool.startup_seconds = 300;  // weights loading
  pool.Run(0, 1500, [](double) { return 16.0; });
  std::vector<double> ups;
  for (const PoolSim::Point& p : pool.trace()) {
    if (p.direction == ScaleDirection::kUp) ups.push_back(p.time);
  }
  ASSERT_GE(ups.size(), 2u);
  for (size_t i = 1; i < ups.size(); ++i) EXPECT_GE(ups[i] - ups[i - 1], 300) << ups[i];
  int pending = 0;
  for (const PoolSim::Point& p : pool.trace()) pending += p.reason == "PendingReplicas";
  EXPECT_GT(pending, 0);
}

TEST(PlanAutoscaleTrace, UnschedulablePodsStopTheScaleUp) {
  PoolSim pool(Policy(1, 20), 4);
  pool.schedulable = 5;  // the cluster has room for one more pod
  pool.Run(0, 1800, [](double) { return 12.0; });
  EXPECT_EQ(pool.Visited(), (Trajectory{4, 8}));  // +4, of which 3 never schedule
  EXPECT_EQ(pool.trace().back().reason, "Unschedulable");
}

TEST(PlanAutoscaleTrace, GpuBudgetCapsThePool) {
  PoolSim pool(Policy(1, 20), 2);
  pool.gpu_budget = 47;  // five pods of 8 GPUs
  pool.Run(0, 1800, [](double) { return 12.0; });
  EXPECT_EQ(pool.Visited(), (Trajectory{2, 5}));
  EXPECT_EQ(pool.trace().back().reason, "GpuBudget");
}

TEST(PlanAutoscaleTrace, GpuBudgetCapsBothPoolsTogether) {
  PoolSim prefill(Policy(1, 20), 2, AutoscaleRole::kPrefill), decode(Policy(1, 20), 2);
  const int64_t budget = 64;  // eight pods of 8 GPUs between the two pools
  for (double t = 0; t < 3600; t += 15) {
    // Planned one after the other, each against what the other holds now.
    prefill.gpu_budget = PoolGpuBudget(budget, decode.replicas(), decode.gpus_per_replica);
    prefill.Step(t, 10);
    decode.gpu_budget = PoolGpuBudget(budget, prefill.replicas(), prefill.gpus_per_replica);
    decode.Step(t, 10);
    EXPECT_LE((prefill.replicas() + decode.replicas()) * 8, budget) << t;
  }
  EXPECT_EQ(prefill.replicas() + decode.replicas(), 8);
}

TEST(PlanAutoscaleTrace, MinAndMaxBoundEveryDecision) {
  PoolSim pool(Policy(2, 6), 4);
  pool.Run(0, 1800, [](double) { return 0.0; });      // idle
  pool.Run(1800, 3600, [](double) { return 50.0; });  // far beyond what 6 can carry
  EXPECT_EQ(pool.Visited(), (Trajectory{4, 3, 2, 6}));
  EXPECT_EQ(pool.trace().back().reason, "AtMax");
  EXPECT_EQ(pool.trace()[100].reason, "AtMin");
}

TEST(PlanAutoscaleTrace, MissingSignalsNeverScaleDown) {
  AutoscaleInput in;
  in.policy = Policy(1, 10);
  in.replicas = in.ready_replicas = 6;
  for (double t = 0; t < 3600; t += 15) {
    in.now_seconds = t;
    AutoscaleDecision d = PlanAutoscale(in);  // no scrape ever arrives
    ASSERT_EQ(d.replicas, 6) << t;
    EXPECT_EQ(d.reason, "NoSignals");
    in.history = d.history;
  }
}

TEST(PlanAutoscaleTrace, ExternalModeStandsAside) {
  AutoscalePolicy policy = Policy(1, 10);
  policy.mode = AutoscaleMode::kExternal;
  PoolSim pool(policy, 3);
  pool.Run(0, 1800, [](double t) { return t < 900 ? 10.0 : 0.0; });
  EXPECT_EQ(pool.Visited(), (Trajectory{3}));
  for (const PoolSim::Point& p : pool.trace()) EXPECT_EQ(p.reason, "External");
}

}  // namespace
}  // namespace tandem::controller::reconcile
