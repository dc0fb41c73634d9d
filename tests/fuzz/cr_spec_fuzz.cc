// libFuzzer target across the controller/agent seam: a ModelDeployment or ModelPool as the API
// server would hand it to tandem-controller (any JSON; metadata filled in when absent), through
// the spec checks and the planners, to the agent configs the controller renders. Built with clang
// by scripts/fuzz.sh, not by CMake.
//
// Input: byte 0 bit 0 clear: a ModelDeployment, set: a ModelPool; the rest is JSON text (the
// object, or anything else, which becomes its spec).
// Invariants beyond "no crash, no sanitizer report, no exception":
// - a refusal is InvalidArgument whose message names the field at fault (starts with "spec" or
//   "metadata");
// - a ModelDeployment the checks accept plans: a ConfigMap with the prefill, decode and router
//   configs, and two ModelPools; every one of those configs is one tandem-agent accepts (the
//   router's once the Services the router Deployment names are set, as its environment sets
//   them), with the spec's precision, tensorParallel and integrity settings; each ModelPool
//   child, given the uid the API server would give it, plans in turn (StatefulSet, Service,
//   PodDisruptionBudget);
// - a ModelPool the checks accept plans its three children.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/config.h"
#include "common/json_depth.h"
#include "controller/reconcile/deployment_plan.h"
#include "controller/reconcile/engine_config.h"
#include "controller/reconcile/pool_plan.h"

namespace {

using tandem::StatusCode;
using tandem::StatusOr;
using tandem::agent::AgentConfig;
using tandem::agent::Role;
namespace rc = tandem::controller::reconcile;
using rc::json;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckRefusal(const tandem::Status& status) {
  Check(status.code() == StatusCode::kInvalidArgument);
  const std::string_view m = status.message();
  Check(m.starts_with("spec") || m.starts_with("metadata"));
}

// What the API server guarantees of a stored object: a name, a namespace, a uid.
json Stored(json object, std::string_view kind) {
  if (!object.is_object()) object = json{{"spec", object}};
  object["apiVersion"] = "tandem.dev/v1alpha1";
  object["kind"] = kind;
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (!meta["name"].is_string()) meta["name"] = "fuzz";
  if (!meta["namespace"].is_string()) meta["namespace"] = "default";
  meta["uid"] = "00000000-0000-0000-0000-000000000001";
  return object;
}

AgentConfig ParseRendered(const std::string& text, Role role) {
  StatusOr<AgentConfig> c = tandem::agent::ParseAgentConfig(text, /*validate=*/false);
  Check(c.ok());
  Check(c->role == role);
  if (role == Role::kRouter) {  // the router Deployment's env: TANDEM_PREFILL_SERVICE, TANDEM_DECODE_SERVICE
    c->prefill_service = "p.ns.svc:50051";
    c->decode_service = "d.ns.svc:50051";
  }
  Check(tandem::agent::ValidateAgentConfig(*c).ok());
  return *c;
}

void CheckPoolConfig(const AgentConfig& c, const rc::PoolSpec& pool, const rc::CommonSpec& common) {
  Check(tandem::engine::WeightFormatName(c.weights) == pool.weights);
  Check(tandem::engine::KvCacheDtypeName(c.kv_cache) == pool.kv_cache);
  Check(c.tensor_parallel == pool.tensor_parallel);
  Check(c.page_tags == common.page_tags && c.transfer_checksum == common.transfer_checksum);
  Check(pool.kv_cache_bytes == 0 || c.kv_cache_bytes == static_cast<uint64_t>(pool.kv_cache_bytes));
}

void Deployment(const json& mdep) {
  StatusOr<rc::DeploymentPlan> plan = rc::PlanDeployment(mdep);
  if (!plan.ok()) {
    CheckRefusal(plan.status());
    return;
  }
  int config_maps = 0, pools = 0;
  for (const rc::DesiredObject& child : plan->children) {
    const json& o = child.object;
    if (o["kind"] == "ConfigMap") {
      ++config_maps;
      const json& data = o["data"];
      CheckPoolConfig(ParseRendered(data[rc::ConfigKey("prefill")].get<std::string>(), Role::kPrefill),
                      plan->spec.prefill, plan->spec.common);
      CheckPoolConfig(ParseRendered(data[rc::ConfigKey("decode")].get<std::string>(), Role::kDecode),
                      plan->spec.decode, plan->spec.common);
      Check(ParseRendered(data[rc::ConfigKey("router")].get<std::string>(), Role::kRouter)
                .forward_unknown_tool_calls == plan->spec.forward_unknown_tool_calls);
    } else if (o["kind"] == "ModelPool") {
      ++pools;
      json pool = o;
      pool["metadata"]["uid"] = "00000000-0000-0000-0000-000000000002";
      StatusOr<rc::PoolPlan> pool_plan = rc::PlanPool(pool);
      Check(pool_plan.ok());
      Check(pool_plan->children.size() == 3);
    }
  }
  Check(config_maps == 1 && pools == 2);
}

void Pool(const json& pool) {
  StatusOr<rc::PoolPlan> plan = rc::PlanPool(pool);
  if (!plan.ok()) {
    CheckRefusal(plan.status());
    return;
  }
  Check(plan->children.size() == 3);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!tandem::JsonDepthWithin(text, 64)) return 0;  // what the Kubernetes client refuses first
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return 0;
  if ((data[0] & 1) == 0) {
    Deployment(Stored(std::move(parsed), "ModelDeployment"));
  } else {
    Pool(Stored(std::move(parsed), "ModelPool"));
  }
  return 0;
}
