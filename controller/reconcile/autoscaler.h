#pragma once
// The built-in autoscaler as a step of the ModelPool reconcile (docs/autoscaling.md, "Wiring"):
// for a pool whose autoscaling is enabled in builtin mode, read its latest load signals (never the
// network: a SignalSource scrapes in the background), count its pods, plan (PlanAutoscale, pure)
// and, when the plan changes spec.replicas, write it, record an Event and count
// tandem_autoscaler_decisions_total. The planner's history lives in AutoscaleMemory between
// reconciles (in memory: a new leader starts afresh, which the planner treats as "nothing seen
// yet", so it waits a whole window before it moves anything).

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "controller/reconcile/apply.h"
#include "controller/reconcile/autoscale_plan.h"
#include "controller/reconcile/deployment_spec.h"

namespace tandem::controller::autoscale {
class SignalSource;
}
namespace tandem::controller::metrics {
class ControllerMetrics;
}

namespace tandem::controller::reconcile {

class EventRecorder;

// Each autoscaled pool's planner history, by "namespace/name". Thread-safe.
class AutoscaleMemory {
 public:
  AutoscaleHistory Get(const std::string& pool_key) const;
  void Put(const std::string& pool_key, AutoscaleHistory history);
  void Forget(const std::string& pool_key);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, AutoscaleHistory> histories_;
};

struct AutoscaleContext {
  const autoscale::SignalSource* signals = nullptr;  // null: the built-in autoscaler does nothing
  AutoscaleMemory* memory = nullptr;                 // REQUIRES: not null when signals is set
  const Clock* clock = nullptr;                      // the signal source's clock; null: SteadyClock
  // A snapshot older than this counts as no signals (the scraper stalled or the pool lost its
  // targets): the pool holds rather than act on stale load.
  double max_signal_age_seconds = 60;
};

// What one evaluation did.
struct AutoscaleOutcome {
  AutoscaleDecision decision;
  bool scaled = false;    // spec.replicas was written
  json pool;              // the ModelPool as stored afterwards (the input when not scaled)
  json status = nullptr;  // status.autoscaler to store
};

// Evaluates `pool` (a ModelPool read from the store, `spec` its parsed spec, `pods` its pods) and
// writes spec.replicas when the decision changes it. Returns the store's error on a failed write
// (Aborted on a conflict: requeue). Does nothing (decision Disabled or External, status null)
// unless spec.pool.autoscale.Builtin() and ctx.signals is set.
StatusOr<AutoscaleOutcome> AutoscalePool(ObjectStore& store, const AutoscaleContext& ctx,
                                         EventRecorder* events, metrics::ControllerMetrics* metrics,
                                         const json& pool, const ModelPoolSpec& spec,
                                         const std::vector<const json*>& pods, std::string_view now_rfc3339);

}  // namespace tandem::controller::reconcile
