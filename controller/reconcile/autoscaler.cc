#include "controller/reconcile/autoscaler.h"

#include <algorithm>
#include <utility>

#include "controller/autoscale/signals.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/deployment_plan.h"
#include "controller/reconcile/events.h"
#include "controller/reconcile/pool_status.h"

namespace tandem::controller::reconcile {

AutoscaleHistory AutoscaleMemory::Get(const std::string& pool_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = histories_.find(pool_key);
  return it == histories_.end() ? AutoscaleHistory{} : it->second;
}

void AutoscaleMemory::Put(const std::string& pool_key, AutoscaleHistory history) {
  std::lock_guard<std::mutex> lock(mu_);
  histories_[pool_key] = std::move(history);
}

void AutoscaleMemory::Forget(const std::string& pool_key) {
  std::lock_guard<std::mutex> lock(mu_);
  histories_.erase(pool_key);
}

size_t AutoscaleMemory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return histories_.size();
}

namespace {

// The deployment's GPU budget left to this pool: the budget less what the other pool holds at its
// spec.replicas. Unset when the deployment sets no budget or cannot be read (no cap rather than a
// made-up one; the planner then only answers to min/max).
std::optional<int64_t> BudgetForPool(ObjectStore& store, const ModelPoolSpec& spec) {
  StatusOr<json> mdep = store.Get(Kind::kModelDeployment, spec.ns, spec.deployment_name);
  if (!mdep.ok()) return std::nullopt;
  const json* budget = FieldReader(*mdep).Object("/spec");
  if (budget == nullptr) return std::nullopt;
  auto it = budget->find("gpuBudget");
  if (it == budget->end() || !it->is_number_integer()) return std::nullopt;
  const int64_t total = it->get<int64_t>();
  const std::string other_role = spec.pool.role == "prefill" ? "decode" : "prefill";
  int64_t other_replicas = 0, other_gpus = 0;
  if (StatusOr<json> other = store.Get(Kind::kModelPool, spec.ns, PoolName(spec.deployment_name, other_role));
      other.ok()) {
    if (StatusOr<ModelPoolSpec> parsed = ParseModelPoolSpec(*other); parsed.ok()) {
      other_replicas = parsed->pool.replicas;
      other_gpus = parsed->pool.gpus;
    }
  }
  return PoolGpuBudget(total, other_replicas, other_gpus);
}

json LastScale(const json& pool) {
  const json* autoscaler = FieldReader(pool).Object("/status/autoscaler");
  if (autoscaler == nullptr) return nullptr;
  auto it = autoscaler->find("lastScale");
  return it == autoscaler->end() ? json(nullptr) : *it;
}

}  // namespace

StatusOr<AutoscaleOutcome> AutoscalePool(ObjectStore& store, const AutoscaleContext& ctx,
                                         EventRecorder* events, metrics::ControllerMetrics* metrics,
                                         const json& pool, const ModelPoolSpec& spec,
                                         const std::vector<const json*>& pods, std::string_view now_rfc3339) {
  AutoscaleOutcome out;
  out.pool = pool;
  const std::string key = spec.ns + "/" + spec.name;
  const AutoscalePolicy& policy = spec.pool.autoscale;
  if (!policy.Builtin() || ctx.signals == nullptr || ctx.memory == nullptr) {
    if (ctx.memory != nullptr) ctx.memory->Forget(key);
    out.decision.replicas = spec.pool.replicas;
    out.decision.reason = policy.enabled ? "External" : "Disabled";
    return out;
  }
  const Clock& clock = ctx.clock != nullptr ? *ctx.clock : SteadyClock::Default();
  AutoscaleInput in;
  in.policy = policy;
  in.role = spec.pool.role == "prefill" ? AutoscaleRole::kPrefill : AutoscaleRole::kDecode;
  in.replicas = spec.pool.replicas;
  for (const json* p : pods) {
    if (PodReady(*p)) ++in.ready_replicas;
    if (!PodUnschedulableMessage(*p).empty()) in.unschedulable = true;
  }
  in.pending_replicas = std::max<int64_t>(0, in.replicas - in.ready_replicas);
  in.now_seconds = clock.NowSeconds();
  if (std::optional<autoscale::PoolSignalsSnapshot> snapshot = ctx.signals->Latest(key)) {
    if (in.now_seconds - snapshot->scraped_at_seconds <= ctx.max_signal_age_seconds)
      in.signals = snapshot->signals;
  }
  in.gpu_budget = BudgetForPool(store, spec);
  in.gpus_per_replica = spec.pool.gpus;
  in.history = ctx.memory->Get(key);
  out.decision = PlanAutoscale(in);
  ctx.memory->Put(key, out.decision.history);

  json last_scale = LastScale(pool);
  if (out.decision.replicas != spec.pool.replicas) {
    json updated = pool;
    updated["spec"]["replicas"] = out.decision.replicas;
    StatusOr<json> written = store.Update(Kind::kModelPool, updated);
    if (!written.ok()) return written.status();
    out.scaled = true;
    out.pool = std::move(*written);
    const char* direction = ScaleDirectionName(out.decision.direction);
    last_scale = {{"time", std::string(now_rfc3339)}, {"direction", direction},
                  {"from", spec.pool.replicas},       {"to", out.decision.replicas},
                  {"reason", out.decision.reason},    {"message", out.decision.message}};
    if (events != nullptr) {
      events->Record(pool, kEventNormal,
                     out.decision.direction == ScaleDirection::kUp ? "ScaledUp" : "ScaledDown",
                     spec.pool.role + " " + std::to_string(spec.pool.replicas) + " -> " +
                         std::to_string(out.decision.replicas) + ": " + out.decision.reason + ": " +
                         out.decision.message);
    }
    if (metrics != nullptr) metrics->CountAutoscalerDecision(spec.deployment_name, spec.pool.role, direction);
  }
  out.status = {{"recommendedReplicas", std::max<int64_t>(0, out.decision.recommended_replicas)},
                {"reason", out.decision.reason}};
  if (!last_scale.is_null()) out.status["lastScale"] = last_scale;
  return out;
}

}  // namespace tandem::controller::reconcile
