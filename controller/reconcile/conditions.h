#pragma once
// metav1.Condition bookkeeping (pure): lastTransitionTime moves only when a condition's status
// flips, so a status recomputed from unchanged facts is byte-identical to the stored one and the
// reconciler can skip the write.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

inline constexpr std::string_view kReady = "Ready";
inline constexpr std::string_view kProgressing = "Progressing";
inline constexpr std::string_view kDegraded = "Degraded";

// Reasons (CamelCase, as the CRD's pattern requires).
inline constexpr std::string_view kReasonAllPoolsReady = "AllPoolsReady";
inline constexpr std::string_view kReasonAllReplicasReady = "AllReplicasReady";
inline constexpr std::string_view kReasonPodsNotReady = "PodsNotReady";
inline constexpr std::string_view kReasonInsufficientCapacity = "InsufficientCapacity";
inline constexpr std::string_view kReasonInvalidSpec = "InvalidSpec";
inline constexpr std::string_view kReasonRolloutInProgress = "RolloutInProgress";
inline constexpr std::string_view kReasonRolloutComplete = "RolloutComplete";
inline constexpr std::string_view kReasonResourceNotOwned = "ResourceNotOwned";
inline constexpr std::string_view kReasonAsExpected = "AsExpected";

struct Condition {
  std::string type;
  bool status = false;  // "True" / "False"
  std::string reason;
  std::string message;
};

// Ready=False, Progressing=False and Degraded=True, each with reason InvalidSpec and `message`:
// what a deployment or pool whose spec cannot be planned reports (its children are not touched).
std::vector<Condition> InvalidSpecConditions(const std::string& message);

// The condition list to store: one entry per `desired` condition (in that order), each with
// observedGeneration = `generation`; lastTransitionTime copied from `existing` (the stored list,
// may be null) when the type is there with the same status, else `now` (RFC 3339).
json MergeConditions(const json& existing, const std::vector<Condition>& desired, int64_t generation,
                     std::string_view now);

// object[field] when `object` is an object and that field a string, else "" (never throws).
std::string StringField(const json& object, const char* field);

// The object's status.conditions list, or null when it has none.
json StoredConditions(const json& object);

// The stored condition of `type` in `status` ({conditions: [...]}), or nullptr.
const json* FindCondition(const json& status, std::string_view type);

// True when `status` holds condition `type` with status "True".
bool ConditionIsTrue(const json& status, std::string_view type);

// Seconds since the Unix epoch as "2026-12-01T01:15:23Z".
std::string Rfc3339(int64_t unix_seconds);

}  // namespace tandem::controller::reconcile
