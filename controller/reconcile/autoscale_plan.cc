#include "controller/reconcile/autoscale_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace tandem::controller::reconcile {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string Replicas(int64_t n) { return std::to_string(n) + (n == 1 ? " replica" : " replicas"); }

// One signal against its target, both per replica (sums are divided by the ready replicas).
struct Signal {
  const char* what;    // for the message
  const char* reason;  // when it is the one that scales the pool up
  double metric;
  double target;
};

bool Usable(const std::optional<double>& v) { return v.has_value() && std::isfinite(*v) && *v >= 0; }

std::vector<Signal> RoleSignals(const AutoscaleInput& in) {
  const AutoscaleSignals& s = in.signals;
  const AutoscalePolicy& p = in.policy;
  const double ready = static_cast<double>(in.ready_replicas);
  std::vector<Signal> out;
  auto add = [&](const std::optional<double>& metric, double divide_by, double target, const char* what,
                 const char* reason) {
    if (Usable(metric) && target > 0) out.push_back({what, reason, *metric / divide_by, target});
  };
  if (in.role == AutoscaleRole::kDecode) {
    add(s.kv_cache_usage, 1, p.target_kv_cache_usage, "KV cache usage", "KvCacheAboveTarget");
    add(s.waiting_requests, ready, static_cast<double>(p.target_waiting_requests_per_replica),
        "waiting requests per replica", "WaitingRequestsAboveTarget");
    add(s.itl_p95_seconds, 1, p.target_itl_seconds.value_or(0), "ITL p95 (s)", "ItlAboveTarget");
  } else {
    add(s.waiting_prefill_tokens, ready, static_cast<double>(p.target_waiting_prefill_tokens_per_replica),
        "waiting prefill tokens per replica", "WaitingPrefillTokensAboveTarget");
    add(s.ttft_p95_seconds, 1, p.target_ttft_seconds.value_or(0), "TTFT p95 (s)", "TtftAboveTarget");
  }
  return out;
}

struct Recommendation {
  int64_t replicas;
  std::string reason;
  std::string message;
};

// The largest of the signals' recommendations; the current size when none has a say.
Recommendation Recommend(const AutoscaleInput& in, int64_t current) {
  if (in.ready_replicas <= 0) return {current, "NoReadyReplicas", "no Ready replica to measure"};
  const std::vector<Signal> signals = RoleSignals(in);
  if (signals.empty()) return {current, "NoSignals", "no signal measured"};
  const double ready = static_cast<double>(std::min(in.ready_replicas, kMaxInt32));
  int64_t best = -1;
  const Signal* top = nullptr;
  std::string all;
  for (const Signal& s : signals) {
    const double ratio = s.metric / s.target;
    int64_t rec = current;
    if (std::abs(ratio - 1.0) > kAutoscaleTolerance) {
      // The epsilon keeps a product that is whole but for rounding (4.0000000000000009) at 4.
      rec = static_cast<int64_t>(std::min(std::ceil(ready * ratio - 1e-9), static_cast<double>(kMaxInt32)));
    }
    all += std::string(all.empty() ? "" : ", ") + s.what + " " + Num(s.metric) + " (target " + Num(s.target) +
           ")";
    if (rec > best) best = rec, top = &s;
  }
  if (best > current) {
    return {best, top->reason,
            std::string(top->what) + " " + Num(top->metric) + " is above its target " + Num(top->target) +
                " (recommends " + std::to_string(best) + ")"};
  }
  if (best < current) {
    return {best, "BelowTargets", "below target: " + all + " (recommends " + std::to_string(best) + ")"};
  }
  return {best, "AtTarget", "at target: " + all};
}

// Appends this call's recommendation and forgets what no window can see any more.
AutoscaleHistory Record(AutoscaleHistory h, double now, int64_t replicas, double window) {
  std::deque<AutoscaleRecommendation>& q = h.recommendations;
  if (!h.since_seconds || *h.since_seconds > now)
    h.since_seconds = now;  // first call, or the clock went back
  while (!q.empty() && q.back().time_seconds > now) q.pop_back();
  while (!q.empty() && q.front().time_seconds <= now - window) q.pop_front();
  if (!q.empty() && q.back().replicas == replicas) q.pop_back();  // the newer equal entry covers it
  q.push_back({now, replicas});
  while (q.size() > kAutoscaleHistoryLimit) q.pop_front();
  return h;
}

// The HPA's stabilization: up to the smallest recommendation of the up window, down to the
// largest of the down window. Time before since_seconds counts as recommending `current`.
int64_t Stabilize(const AutoscaleHistory& h, double now, int64_t current, const AutoscalePolicy& p) {
  const double up_window = static_cast<double>(p.scale_up_delay_seconds);
  const double down_window = static_cast<double>(p.scale_down_delay_seconds);
  int64_t up = h.recommendations.back().replicas, down = up;
  for (const AutoscaleRecommendation& r : h.recommendations) {
    if (r.time_seconds > now - up_window) up = std::min(up, r.replicas);
    if (r.time_seconds > now - down_window) down = std::max(down, r.replicas);
  }
  const double watched = now - h.since_seconds.value_or(now);
  if (watched < up_window) up = std::min(up, current);
  if (watched < down_window) down = std::max(down, current);
  return std::clamp(current, up, std::max(up, down));
}

// Where a decision stands after each stage; the last stage that moved it names it.
struct Outcome {
  int64_t replicas;
  std::string reason;
  std::string note;  // what held or limited the move, for the message

  void Limit(int64_t to, const char* why, std::string text) {
    if (to == replicas) return;
    replicas = to, reason = why, note = std::move(text);
  }
};

// Step limits pace a move without renaming it; then no scale-up while pods are not Ready yet.
void StepsAndGuards(const AutoscaleInput& in, int64_t current, Outcome* o) {
  const AutoscalePolicy& p = in.policy;
  if (o->replicas > current) o->replicas = std::min(o->replicas, current + p.max_scale_up_step);
  if (o->replicas < current) o->replicas = std::max(o->replicas, current - p.max_scale_down_step);
  if (o->replicas <= current) return;
  if (in.unschedulable) {
    o->Limit(current, "Unschedulable", "a pod cannot be scheduled (insufficient capacity)");
  } else if (in.pending_replicas > 0) {
    o->Limit(current, "PendingReplicas", Replicas(in.pending_replicas) + " not Ready yet");
  }
}

// minReplicas and maxReplicas override the windows and the guards, as the HPA's do.
void Bounds(const AutoscalePolicy& p, int64_t current, int64_t recommended, Outcome* o) {
  const std::string at_max = "at maxReplicas " + std::to_string(p.max_replicas);
  const std::string at_min = "at minReplicas " + std::to_string(p.min_replicas);
  if (current < p.min_replicas)
    o->Limit(std::max(o->replicas, p.min_replicas), "BelowMinReplicas", "raising to minReplicas");
  if (current > p.max_replicas)
    o->Limit(std::min(o->replicas, p.max_replicas), "AboveMaxReplicas", "lowering to maxReplicas");
  if (o->replicas > p.max_replicas) o->Limit(p.max_replicas, "AtMax", at_max);
  if (o->replicas < p.min_replicas) o->Limit(p.min_replicas, "AtMin", at_min);
  // Held at a bound: the bound is the reason, whatever else also held it.
  if (o->replicas == current && recommended > current && current >= p.max_replicas)
    o->reason = "AtMax", o->note = at_max;
  if (o->replicas == current && recommended < current && current <= p.min_replicas)
    o->reason = "AtMin", o->note = at_min;
}

// The budget caps growth only: like a ResourceQuota, lowering it never removes replicas.
void Budget(const AutoscaleInput& in, int64_t current, Outcome* o) {
  if (o->replicas <= current || !in.gpu_budget || in.gpus_per_replica <= 0) return;
  const int64_t cap = std::max<int64_t>(0, *in.gpu_budget) / in.gpus_per_replica;
  if (o->replicas <= cap) return;
  o->Limit(std::max(current, cap), "GpuBudget",
           "the GPU budget allows " + Replicas(cap) + " (" + std::to_string(*in.gpu_budget) + " GPUs, " +
               std::to_string(in.gpus_per_replica) + " per replica)");
}

}  // namespace

AutoscaleDecision PlanAutoscale(const AutoscaleInput& in) {
  const AutoscalePolicy& p = in.policy;
  const int64_t current = std::clamp<int64_t>(in.replicas, 0, kMaxInt32);
  AutoscaleDecision d;
  d.replicas = d.recommended_replicas = current;
  if (!p.enabled) {
    d.reason = "Disabled";
    d.message = "autoscaling is not enabled: replicas are the spec's";
    return d;
  }
  if (p.mode == AutoscaleMode::kExternal) {
    d.reason = "External";
    d.message =
        "autoscaling.mode is external: another autoscaler owns replicas through the scale subresource";
    return d;
  }

  const Recommendation rec = Recommend(in, current);
  d.recommended_replicas = rec.replicas;
  d.history = Record(in.history, in.now_seconds, rec.replicas,
                     static_cast<double>(std::max(p.scale_up_delay_seconds, p.scale_down_delay_seconds)));
  Outcome o{Stabilize(d.history, in.now_seconds, current, p), rec.reason, ""};
  if (o.replicas != rec.replicas) {
    const int64_t window = rec.replicas > current ? p.scale_up_delay_seconds : p.scale_down_delay_seconds;
    o.reason = "Stabilizing", o.note = "stabilizing over " + std::to_string(window) + " s";
  }
  StepsAndGuards(in, current, &o);
  Bounds(p, current, rec.replicas, &o);
  Budget(in, current, &o);

  d.replicas = o.replicas;
  d.direction = o.replicas > current   ? ScaleDirection::kUp
                : o.replicas < current ? ScaleDirection::kDown
                                       : ScaleDirection::kHold;
  d.reason = o.reason;
  d.message = rec.message + (o.note.empty() ? "" : "; " + o.note) + ": " +
              (o.replicas == current ? "holding at " + Replicas(current)
                                     : std::to_string(current) + " -> " + Replicas(o.replicas));
  return d;
}

std::optional<int64_t> PoolGpuBudget(std::optional<int64_t> deployment_budget, int64_t other_replicas,
                                     int64_t other_gpus_per_replica) {
  if (!deployment_budget) return std::nullopt;
  const int64_t other = std::clamp<int64_t>(other_replicas, 0, kMaxInt32) *
                        std::clamp<int64_t>(other_gpus_per_replica, 0, kMaxInt32);
  return std::max<int64_t>(0, std::max<int64_t>(0, *deployment_budget) - other);
}

const char* ScaleDirectionName(ScaleDirection direction) {
  switch (direction) {
    case ScaleDirection::kUp: return "up";
    case ScaleDirection::kDown: return "down";
    case ScaleDirection::kHold: return "hold";
  }
  return "hold";
}

}  // namespace tandem::controller::reconcile
