#include "controller/reconcile/autoscale_plan.h"

#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

// Single decisions and the stabilization windows; load traces: autoscale_plan_trace_test.cc.

namespace tandem::controller::reconcile {
namespace {

AutoscalePolicy Policy(int64_t min_replicas = 1, int64_t max_replicas = 10) {
  AutoscalePolicy p;
  p.enabled = true;
  p.min_replicas = min_replicas;
  p.max_replicas = max_replicas;
  return p;
}

// ---- One decision at a time (no windows: those have their own tests below) ----

// A decode pool of 3 ready replicas at exactly its targets, planned without windows.
AutoscaleInput AtTarget() {
  AutoscaleInput in;
  in.policy = Policy();
  in.policy.scale_up_delay_seconds = in.policy.scale_down_delay_seconds = 0;
  in.replicas = in.ready_replicas = 3;
  in.signals.kv_cache_usage = 0.8;
  in.now_seconds = 1000;
  return in;
}

struct Case {
  const char* name;
  std::function<void(AutoscaleInput&)> setup;
  int64_t replicas;
  ScaleDirection direction;
  const char* reason;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PlanAutoscaleTable : public testing::TestWithParam<Case> {};

TEST_P(PlanAutoscaleTable, Decides) {
  AutoscaleInput in = AtTarget();
  GetParam().setup(in);
  AutoscaleDecision d = PlanAutoscale(in);
  EXPECT_EQ(d.replicas, GetParam().replicas) << d.message;
  EXPECT_EQ(ScaleDirectionName(d.direction), std::string(ScaleDirectionName(GetParam().direction)))
      << d.message;
  EXPECT_EQ(d.reason, GetParam().reason) << d.message;
  EXPECT_FALSE(d.message.empty());
}

using D = ScaleDirection;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

INSTANTIATE_TEST_SUITE_P(
    Table, PlanAutoscaleTable,
    testing::Values(
        // Signals: ceil(ready * metric / target), the largest, outside a 10% band.
        Case{"KvAboveTarget", [](auto& in) { in.signals.kv_cache_usage = 0.96; }, 4, D::kUp,
             "KvCacheAboveTarget"},
        Case{"KvInsideTolerance", [](auto& in) { in.signals.kv_cache_usage = 0.87; }, 3, D::kHold,
             "AtTarget"},
        Case{"KvBelowTargetDrainsOne", [](auto& in) { in.signals.kv_cache_usage = 0.2; }, 2, D::kDown,
             "BelowTargets"},
        Case{"WaitingRequests",  // 20 waiting over 3 = 6.7 a replica against 4: ceil(3 * 1.67) = 5
             [](auto& in) { in.signals.waiting_requests = 20; }, 5, D::kUp, "WaitingRequestsAboveTarget"},
        Case{"WaitingRequestsOff",
             [](auto& in) {
               in.policy.target_waiting_requests_per_replica = 0;
               in.signals.waiting_requests = 20;
             },
             3, D::kHold, "AtTarget"},
        Case{"ItlAboveTarget",
             [](auto& in) {
               in.policy.target_itl_seconds = 0.05;
               in.signals.itl_p95_seconds = 0.08;
             },
             5, D::kUp, "ItlAboveTarget"},
        Case{"ItlWithoutTargetIsIgnored", [](auto& in) { in.signals.itl_p95_seconds = 9; }, 3, D::kHold,
             "AtTarget"},
        Case{"LargestSignalWins",
             [](auto& in) {
               in.signals.kv_cache_usage = 0.96;  // 4
               in.signals.waiting_requests = 24;  // 6
             },
             6, D::kUp, "WaitingRequestsAboveTarget"},
        Case{"OneSignalAtTargetHoldsTheScaleDown",
             [](auto& in) {
               in.signals.kv_cache_usage = 0.1;
               in.policy.target_itl_seconds = 0.05;
               in.signals.itl_p95_seconds = 0.05;
             },
             3, D::kHold, "AtTarget"},
        Case{"PrefillTtft",
             [](auto& in) {
               in.role = AutoscaleRole::kPrefill;
               in.policy.target_ttft_seconds = 1.0;
               in.signals.ttft_p95_seconds = 1.5;
             },
             5, D::kUp, "TtftAboveTarget"},
        Case{"PrefillWaitingTokens",  // 49152 over 3 = 16384 a replica against 8192
             [](auto& in) {
               in.role = AutoscaleRole::kPrefill;
               in.signals.waiting_prefill_tokens = 49152;
             },
             6, D::kUp, "WaitingPrefillTokensAboveTarget"},
        Case{"PrefillIgnoresKvCache",
             [](auto& in) {
               in.role = AutoscaleRole::kPrefill;
               in.signals.kv_cache_usage = 1.0;
             },
             3, D::kHold, "NoSignals"},
        Case{"DecodeIgnoresTtft",
             [](auto& in) {
               in.signals = {};
               in.policy.target_ttft_seconds = 1.0;
               in.signals.ttft_p95_seconds = 10;
             },
             3, D::kHold, "NoSignals"},
        // Missing signals never scale down.
        Case{"NoSignals", [](auto& in) { in.signals = {}; }, 3, D::kHold, "NoSignals"},
        Case{"GarbageSignalsAreAbsent",
             [](auto& in) {
               in.signals.kv_cache_usage = kNaN;
               in.signals.waiting_requests = -3;
             },
             3, D::kHold, "NoSignals"},
        Case{"NoReadyReplicas",
             [](auto& in) {
               in.ready_replicas = 0;
               in.signals.kv_cache_usage = 0.0;
             },
             3, D::kHold, "NoReadyReplicas"},
        Case{"HugeQueueIsClampedToMax", [](auto& in) { in.signals.waiting_requests = 1e300; }, 7, D::kUp,
             "WaitingRequestsAboveTarget"},  // 3 + maxScaleUpStep 4
        // Steps.
        Case{"ScaleUpStep",
             [](auto& in) {
               in.policy.max_scale_up_step = 2;
               in.signals.waiting_requests = 100;
             },
             5, D::kUp, "WaitingRequestsAboveTarget"},
        Case{"ScaleDownStep",
             [](auto& in) {
               in.policy.max_scale_down_step = 2;
               in.signals.kv_cache_usage = 0.0;
             },
             1, D::kDown, "BelowTargets"},
        // The Pending guard: no scale-up while a pod is not Ready or cannot be scheduled.
        Case{"PendingBlocksScaleUp",
             [](auto& in) {
               in.replicas = 4, in.pending_replicas = 1;
               in.signals.waiting_requests = 40;
             },
             4, D::kHold, "PendingReplicas"},
        Case{"PendingAlreadyCoversTheLoad",  // ceil(3 ready * 0.9 / 0.8) = 4, which the pending pod makes
             [](auto& in) {
               in.replicas = 4, in.pending_replicas = 1;
               in.signals.kv_cache_usage = 0.9;
             },
             4, D::kHold, "AtTarget"},
        Case{"PendingDoesNotBlockScaleDown",
             [](auto& in) {
               in.replicas = 4, in.pending_replicas = 1;
               in.signals.kv_cache_usage = 0.1;
             },
             3, D::kDown, "BelowTargets"},
        Case{"UnschedulableBlocksScaleUp",
             [](auto& in) {
               in.replicas = 4, in.pending_replicas = 1, in.unschedulable = true;
               in.signals.waiting_requests = 40;
             },
             4, D::kHold, "Unschedulable"},
        // min/max.
        Case{"AtMax",
             [](auto& in) {
               in.policy.max_replicas = 3;
               in.signals.kv_cache_usage = 1.0;
             },
             3, D::kHold, "AtMax"},
        Case{"ClampedToMax",
             [](auto& in) {
               in.policy.max_replicas = 4;
               in.signals.waiting_requests = 100;
             },
             4, D::kUp, "AtMax"},
        Case{"AtMin",
             [](auto& in) {
               in.policy.min_replicas = 3;
               in.signals.kv_cache_usage = 0.0;
             },
             3, D::kHold, "AtMin"},
        Case{"ClampedToMin",
             [](auto& in) {
               in.policy.min_replicas = 2, in.policy.max_scale_down_step = 3;
               in.signals.kv_cache_usage = 0.0;
             },
             2, D::kDown, "AtMin"},
        Case{"BelowMinRaisedEvenWhilePending",
             [](auto& in) {
               in.policy.min_replicas = 5, in.pending_replicas = 1;
               in.signals = {};
             },
             5, D::kUp, "BelowMinReplicas"},
        Case{"AboveMaxLowered",
             [](auto& in) {
               in.policy.max_replicas = 2;
               in.replicas = in.ready_replicas = 6;
             },
             2, D::kDown, "AboveMaxReplicas"},
        // The GPU budget: floor(budget / GPUs per replica) caps growth, never shrinks the pool.
        Case{"GpuBudgetHolds",
             [](auto& in) {
               in.gpu_budget = 31, in.gpus_per_replica = 8;
               in.signals.kv_cache_usage = 1.0;
             },
             3, D::kHold, "GpuBudget"},
        Case{"GpuBudgetCapsTheStep",
             [](auto& in) {
               in.gpu_budget = 40, in.gpus_per_replica = 8;
               in.signals.waiting_requests = 100;
             },
             5, D::kUp, "GpuBudget"},
        Case{"GpuBudgetBelowCurrentDoesNotEvict",
             [](auto& in) {
               in.gpu_budget = 8, in.gpus_per_replica = 8;
               in.replicas = in.ready_replicas = 3;
             },
             3, D::kHold, "AtTarget"},
        Case{"GpuBudgetBeatsMin",
             [](auto& in) {
               in.policy.min_replicas = 5;
               in.gpu_budget = 32, in.gpus_per_replica = 8;
             },
             4, D::kUp, "GpuBudget"},
        Case{"GpuBudgetSkipsGpulessPools",
             [](auto& in) {
               in.gpu_budget = 0, in.gpus_per_replica = 0;
               in.signals.kv_cache_usage = 0.96;
             },
             4, D::kUp, "KvCacheAboveTarget"},
        // The built-in autoscaler off, or standing aside for HPA/KEDA.
        Case{"Disabled",
             [](auto& in) {
               in.policy.enabled = false;
               in.signals.kv_cache_usage = 1.0;
             },
             3, D::kHold, "Disabled"},
        Case{"External",
             [](auto& in) {
               in.policy.mode = AutoscaleMode::kExternal;
               in.signals.kv_cache_usage = 0.0;
             },
             3, D::kHold, "External"}),
    [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(PoolGpuBudget, IsWhatTheOtherPoolLeaves) {
  EXPECT_EQ(PoolGpuBudget(48, 2, 8), 32);
  EXPECT_EQ(PoolGpuBudget(16, 3, 8), 0);   // already over: nothing left, never negative
  EXPECT_EQ(PoolGpuBudget(16, 3, 0), 16);  // a GPU-less pool holds none
  EXPECT_FALSE(PoolGpuBudget(std::nullopt, 3, 8).has_value());
}

// ---- Stabilization windows ----

TEST(PlanAutoscaleWindows, ScaleUpWaitsForAWholeUpWindowAboveTarget) {
  AutoscaleInput in = AtTarget();
  in.policy.scale_up_delay_seconds = 30;
  in.signals.kv_cache_usage = 0.96;
  std::vector<std::string> reasons;
  for (double t : {0.0, 15.0, 30.0}) {
    in.now_seconds = t;
    AutoscaleDecision d = PlanAutoscale(in);
    reasons.push_back(d.reason + "@" + std::to_string(d.replicas));
    in.history = d.history;
  }
  // A fresh planner has watched nothing: it waits the window out before the first scale-up.
  EXPECT_EQ(reasons, (std::vector<std::string>{"Stabilizing@3", "Stabilizing@3", "KvCacheAboveTarget@4"}));
}

TEST(PlanAutoscaleWindows, OneLowReadingInTheUpWindowHoldsTheScaleUp) {
  AutoscaleInput in = AtTarget();
  in.policy.scale_up_delay_seconds = 30;
  in.history.since_seconds = -1000;
  in.history.recommendations = {{980, 3}};  // at target 20 s ago
  in.signals.kv_cache_usage = 1.0;
  AutoscaleDecision d = PlanAutoscale(in);
  EXPECT_EQ(d.replicas, 3);
  EXPECT_EQ(d.reason, "Stabilizing");
  EXPECT_EQ(d.recommended_replicas, 4);
}

TEST(PlanAutoscaleWindows, ScaleDownGoesToTheLargestRecommendationOfTheDownWindow) {
  AutoscaleInput in = AtTarget();
  in.replicas = in.ready_replicas = 6;
  in.policy.scale_down_delay_seconds = 300;
  in.policy.max_scale_down_step = 6;
  in.history.since_seconds = 0;
  in.history.recommendations = {{650, 6}, {750, 4}, {900, 2}};
  in.signals.kv_cache_usage = 0.1;  // recommends 1
  AutoscaleDecision d = PlanAutoscale(in);
  EXPECT_EQ(d.replicas, 4);  // 650 fell out of (700, 1000]; 750 still says 4
  EXPECT_EQ(d.direction, ScaleDirection::kDown);
  EXPECT_EQ(d.reason, "Stabilizing");
  // The history keeps what a window can still see, and only changes of value.
  ASSERT_EQ(d.history.recommendations.size(), 3u);
  EXPECT_EQ(d.history.recommendations.front().time_seconds, 750);
  EXPECT_EQ(d.history.recommendations.back().replicas, 1);
}

TEST(PlanAutoscaleWindows, HistoryStaysSmallOverALongSteadyRun) {
  AutoscaleInput in = AtTarget();
  in.policy = Policy();
  for (int i = 0; i < 10000; ++i) {
    in.now_seconds = i * 15.0;
    AutoscaleDecision d = PlanAutoscale(in);
    in.history = d.history;
  }
  EXPECT_EQ(in.history.recommendations.size(), 1u);
}

TEST(PlanAutoscaleWindows, ExternalAndDisabledForgetTheHistory) {
  AutoscaleInput in = AtTarget();
  in.history.since_seconds = 0;
  in.history.recommendations = {{990, 9}};
  in.policy.mode = AutoscaleMode::kExternal;
  AutoscaleDecision d = PlanAutoscale(in);
  EXPECT_FALSE(d.history.since_seconds.has_value());
  EXPECT_TRUE(d.history.recommendations.empty());
}

}  // namespace
}  // namespace tandem::controller::reconcile
