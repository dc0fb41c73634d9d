#pragma once
// The built-in autoscaler's planner: one pool's next replica count from its policy, its pods'
// state and the load signals. Pure (no I/O, no clock: the caller passes `now` and keeps the
// history between calls). The math and the guards: docs/autoscaling.md.
//
// Each call: a recommendation per signal, HPA-style (ceil(ready * metric / target), the current
// size inside a 10% tolerance band), the largest of them; then the stabilization windows over
// the recorded recommendations; then the step limits; then the guards (no scale-up while a pod
// is not Ready or cannot be scheduled); then min/max; then the GPU budget.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "controller/reconcile/autoscale_policy.h"

namespace tandem::controller::reconcile {

// |metric / target - 1| at or below this is "at target" (the HPA's default tolerance).
inline constexpr double kAutoscaleTolerance = 0.1;
// Recommendations kept at most (only changes are kept, so this is far more than a window holds).
inline constexpr size_t kAutoscaleHistoryLimit = 512;

enum class AutoscaleRole { kPrefill, kDecode };
enum class ScaleDirection { kHold, kUp, kDown };

// Load over the pool's ready members, as scraped; each absent when not measured (no scrape, no
// requests in the window). An absent signal has no say: it never scales the pool down. Negative
// or non-finite values are treated as absent.
struct AutoscaleSignals {
  std::optional<double> kv_cache_usage;          // mean tandem_kv_cache_usage_ratio, 0..1 (decode)
  std::optional<double> waiting_requests;        // sum of tandem_requests_waiting (decode)
  std::optional<double> itl_p95_seconds;         // inter-token latency, p95 (decode)
  std::optional<double> ttft_p95_seconds;        // time to first token, p95 (prefill)
  std::optional<double> waiting_prefill_tokens;  // sum of prompt tokens queued for prefill (prefill)
};

struct AutoscaleRecommendation {
  double time_seconds = 0;
  int64_t replicas = 0;
};

// What the planner remembers between calls for one pool; the caller stores it (in memory: a
// restart starts afresh, which the planner treats as "nothing seen yet", not as "all clear").
struct AutoscaleHistory {
  // When the planner started watching this pool: no scale-up before a whole up window, and no
  // scale-down before a whole down window, has been watched.
  std::optional<double> since_seconds;
  // Raw recommendations within the longer window, oldest first; a run of equal values is kept as
  // its newest entry (equivalent for both windows' min and max).
  std::deque<AutoscaleRecommendation> recommendations;
};

struct AutoscaleInput {
  AutoscalePolicy policy;
  AutoscaleRole role = AutoscaleRole::kDecode;
  int64_t replicas = 0;          // spec.replicas now
  int64_t ready_replicas = 0;    // pods Ready
  int64_t pending_replicas = 0;  // pods asked for and not Ready yet (Pending, starting, loading)
  bool unschedulable = false;    // a pod of the pool is Pending with PodScheduled=False
  AutoscaleSignals signals;
  // GPUs this pool may hold in all (PoolGpuBudget); unset: no budget.
  std::optional<int64_t> gpu_budget;
  int64_t gpus_per_replica = 0;  // tensorParallel for a GPU pool (PoolSpec::gpus); 0: not counted
  double now_seconds = 0;        // a monotonic clock's reading
  AutoscaleHistory history;
};

struct AutoscaleDecision {
  int64_t replicas = 0;              // what spec.replicas should be
  int64_t recommended_replicas = 0;  // the signals' recommendation before windows, steps and guards
  ScaleDirection direction = ScaleDirection::kHold;
  // CamelCase, for events and conditions: the signal that moved the pool (KvCacheAboveTarget,
  // WaitingRequestsAboveTarget, ItlAboveTarget, TtftAboveTarget, WaitingPrefillTokensAboveTarget,
  // BelowTargets), or what held or limited it (AtTarget: the signals recommend the current size, NoSignals,
  // NoReadyReplicas, Stabilizing, PendingReplicas, Unschedulable, AtMax, AtMin, BelowMinReplicas,
  // AboveMaxReplicas, GpuBudget, Disabled, External).
  std::string reason;
  std::string message;       // for people: the signal, its target, and what held it
  AutoscaleHistory history;  // to pass back in the next call
};

// The next replica count for one pool. Never throws; input from outside (signals, counts) is
// clamped or ignored rather than trusted.
// REQUIRES: in.policy as ParseAutoscalePolicy returns it (min <= max, steps >= 1, windows >= 0).
AutoscaleDecision PlanAutoscale(const AutoscaleInput& in);

// The GPUs one pool may hold under the deployment's budget: the budget less what the other pool
// holds at its spec.replicas (never below 0); unset when there is no budget. Plan the pools one
// after the other and apply the first decision before computing the second's budget, so that two
// scale-ups in one pass cannot overshoot together.
std::optional<int64_t> PoolGpuBudget(std::optional<int64_t> deployment_budget, int64_t other_replicas,
                                     int64_t other_gpus_per_replica);

// "hold", "up", "down": the direction label of tandem_autoscaler_decisions_total.
const char* ScaleDirectionName(ScaleDirection direction);

}  // namespace tandem::controller::reconcile
