#pragma once
// A pool's autoscaling policy (ModelPool.spec.autoscaling, the same block in
// ModelDeployment.spec.{prefill,decode}) read into a struct, with the checks the CRD makes made
// again (a policy may have been stored before a rule existed, or come from a test). Pure: no I/O.
// Field guide: crds/README.md; what the planner does with it: docs/autoscaling.md.

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

// Who writes the pool's replicas while autoscaling is enabled.
enum class AutoscaleMode {
  kBuiltin,   // tandem-controller's planner (autoscale_plan.h)
  kExternal,  // HPA, KEDA or anything else through the ModelPool's scale subresource
};

// Defaults are the CRD's (crds/generate.py), so an object the API server did not default reads
// the same as one it did.
struct AutoscalePolicy {
  bool enabled = false;
  AutoscaleMode mode = AutoscaleMode::kBuiltin;
  int64_t min_replicas = 1;
  int64_t max_replicas = 2147483647;  // required (by the CRD and here) when the built-in mode is on

  // Targets. Utilization targets are per replica; a target of 0 turns its signal off, an unset
  // latency target leaves latency out. Which role reads which: docs/autoscaling.md.
  double target_kv_cache_usage = 0.8;                        // decode; mean ratio in (0, 1]
  int64_t target_waiting_requests_per_replica = 4;           // decode
  int64_t target_waiting_prefill_tokens_per_replica = 8192;  // prefill
  std::optional<double> target_ttft_seconds;                 // prefill; p95 time to first token
  std::optional<double> target_itl_seconds;                  // decode; p95 inter-token latency

  // Stabilization windows (CRD scaleUpDelaySeconds / scaleDownDelaySeconds): a scale-up needs
  // every recommendation of the last scale_up_delay_seconds above the current size, a
  // scale-down every one of the last scale_down_delay_seconds below it.
  int64_t scale_up_delay_seconds = 30;
  int64_t scale_down_delay_seconds = 300;
  // Most replicas added or removed by one decision; scale-down drains one at a time by default.
  int64_t max_scale_up_step = 4;
  int64_t max_scale_down_step = 1;

  // True when tandem-controller's planner owns the replicas.
  bool Builtin() const { return enabled && mode == AutoscaleMode::kBuiltin; }
};

// Reads `autoscaling` (an object, or null for "absent": the defaults, disabled). InvalidArgument
// names the field under `field_prefix`: with "spec.decode.autoscaling",
// "spec.decode.autoscaling.maxReplicas: 2 is below minReplicas 5".
StatusOr<AutoscalePolicy> ParseAutoscalePolicy(const json& autoscaling, std::string_view field_prefix);

}  // namespace tandem::controller::reconcile
