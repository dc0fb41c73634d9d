#include "controller/reconcile/autoscale_policy.h"

#include <cmath>
#include <limits>
#include <string>

namespace tandem::controller::reconcile {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

// An integer field within [low, kMaxInt32] (the CRD declares them int32).
int64_t BoundedInt(FieldReader& r, const char* name, int64_t fallback, int64_t low) {
  const int64_t v = r.Int(std::string("/") + name, fallback);
  if (v < low) r.Fail(std::string(name) + ": must be >= " + std::to_string(low));
  if (v > kMaxInt32) r.Fail(std::string(name) + ": must be at most 2147483647");
  return v;
}

// A latency target: absent, or a finite number of seconds above 0.
std::optional<double> Seconds(FieldReader& r, const json& autoscaling, const char* name) {
  if (!autoscaling.contains(name) || autoscaling.at(name).is_null()) return std::nullopt;
  const double v = r.Number(std::string("/") + name, 1.0);
  if (!(v > 0.0) || !std::isfinite(v)) r.Fail(std::string(name) + ": want a number of seconds above 0");
  return v;
}

}  // namespace

StatusOr<AutoscalePolicy> ParseAutoscalePolicy(const json& autoscaling, std::string_view field_prefix) {
  AutoscalePolicy p;
  if (autoscaling.is_null()) return p;
  if (!autoscaling.is_object())
    return Status::InvalidArgument(std::string(field_prefix) + ": want an object");
  // Field names relative to the block; the prefix is added to the one error kept.
  FieldReader r(autoscaling);
  p.enabled = r.Bool("/enabled", false);
  const std::string mode = r.String("/mode", "builtin");
  if (mode == "external") {
    p.mode = AutoscaleMode::kExternal;
  } else if (mode != "builtin") {
    r.Fail("mode: '" + mode + "' is not builtin or external");
  }
  p.min_replicas = BoundedInt(r, "minReplicas", p.min_replicas, 1);
  p.max_replicas = BoundedInt(r, "maxReplicas", p.max_replicas, 1);
  if (p.max_replicas < p.min_replicas) {
    r.Fail("maxReplicas: " + std::to_string(p.max_replicas) + " is below minReplicas " +
           std::to_string(p.min_replicas));
  }
  if (p.Builtin() && !autoscaling.contains("maxReplicas")) {
    r.Fail("maxReplicas: required when autoscaling is enabled in builtin mode");
  }

  p.target_kv_cache_usage = r.Number("/targetKvCacheUsage", p.target_kv_cache_usage);
  if (!(p.target_kv_cache_usage > 0.0 && p.target_kv_cache_usage <= 1.0)) {
    r.Fail("targetKvCacheUsage: want a number in (0, 1]");
  }
  p.target_waiting_requests_per_replica =
      BoundedInt(r, "targetWaitingRequestsPerReplica", p.target_waiting_requests_per_replica, 0);
  p.target_waiting_prefill_tokens_per_replica =
      BoundedInt(r, "targetWaitingPrefillTokensPerReplica", p.target_waiting_prefill_tokens_per_replica, 0);
  p.target_ttft_seconds = Seconds(r, autoscaling, "targetTTFTSeconds");
  p.target_itl_seconds = Seconds(r, autoscaling, "targetITLSeconds");

  p.scale_up_delay_seconds = BoundedInt(r, "scaleUpDelaySeconds", p.scale_up_delay_seconds, 0);
  p.scale_down_delay_seconds = BoundedInt(r, "scaleDownDelaySeconds", p.scale_down_delay_seconds, 0);
  p.max_scale_up_step = BoundedInt(r, "maxScaleUpStep", p.max_scale_up_step, 1);
  p.max_scale_down_step = BoundedInt(r, "maxScaleDownStep", p.max_scale_down_step, 1);

  if (!r.status().ok()) {
    return Status::InvalidArgument(std::string(field_prefix) + "." + r.status().message());
  }
  return p;
}

}  // namespace tandem::controller::reconcile
