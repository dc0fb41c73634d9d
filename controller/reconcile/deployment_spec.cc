#include "controller/reconcile/deployment_spec.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <utility>

namespace tandem::controller::reconcile {
namespace {

// The CRD caps names at 44 so that "<name>-prefill" fits a StatefulSet name (52, because pods
// carry controller-revision-hash "<sts>-<10 chars>" as a label value); checked again here since a
// ModelDeployment may have been stored before that rule existed.
constexpr size_t kMaxDeploymentName = 44;

std::string P(std::string_view base, std::string_view field) {
  return std::string(base) + "/" + std::string(field);
}

bool IsDns1035Label(std::string_view s) {
  if (s.empty() || s.size() > 63 || !std::islower(static_cast<unsigned char>(s.front())) || s.back() == '-') {
    return false;
  }
  for (char c : s) {
    bool ok = std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

// The GPU count asked for in requests or limits: -1 when neither mentions nvidia.com/gpu.
int64_t RequestedGpus(FieldReader& reader, std::string_view pointer, const json& resources) {
  int64_t gpus = -1;
  for (const char* section : {"requests", "limits"}) {
    auto sec = resources.find(section);
    if (sec == resources.end() || !sec->is_object()) continue;
    auto g = sec->find("nvidia.com/gpu");
    if (g == sec->end()) continue;
    int64_t v = -1;
    if (g->is_number_integer()) {
      v = g->get<int64_t>();
    } else if (g->is_string()) {
      const std::string& text = g->get_ref<const std::string&>();
      for (size_t i = 0; i < text.size() && i < 6; ++i) {
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) break;
        if (i + 1 == text.size()) v = std::stoll(text);
      }
    }
    if (v < 0) {
      reader.Fail(FieldPath(P(pointer, "resources/")) + section + ".nvidia.com/gpu: want a whole number");
      return -1;
    }
    if (gpus >= 0 && gpus != v) {
      reader.Fail(FieldPath(P(pointer, "resources")) + ": GPU requests and limits differ");
      return -1;
    }
    gpus = v;
  }
  return gpus;
}

// A Kubernetes resource quantity ("500m", "40Gi", "2", "1.5", "1e3"): the API server refuses
// anything else, so it is refused here, once, as an invalid spec instead of a retried write.
bool IsQuantity(const json& q) {
  if (q.is_number()) return q.get<double>() >= 0;
  if (!q.is_string()) return false;
  const std::string& s = q.get_ref<const std::string&>();
  size_t i = s.starts_with("+") ? 1 : 0, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0 || s.size() > 64) return false;
  const std::string_view suffix = std::string_view(s).substr(i);
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    size_t j = suffix[1] == '+' || suffix[1] == '-' ? 2 : 1;
    if (j == suffix.size()) return false;
    for (; j < suffix.size(); ++j) {
      if (!std::isdigit(static_cast<unsigned char>(suffix[j]))) return false;
    }
    return true;
  }
  for (std::string_view ok :
       {"", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}) {
    if (suffix == ok) return true;
  }
  return false;
}

void CheckResources(FieldReader& r, std::string_view pointer, const json& resources) {
  for (const char* section : {"requests", "limits"}) {
    auto sec = resources.find(section);
    if (sec == resources.end()) continue;
    if (!sec->is_object()) {
      r.Fail(FieldPath(std::string(pointer)) + "." + section + ": want a map of quantities");
      continue;
    }
    for (auto it = sec->begin(); it != sec->end(); ++it) {
      if (!IsQuantity(it.value())) {
        r.Fail(FieldPath(std::string(pointer)) + "." + section + "." + it.key() + ": '" +
               it.value().dump().substr(0, 40) + "' is not a quantity such as 500m or 40Gi");
      }
    }
  }
}

// Replica counts are int32 in every workload API.
void CheckReplicas(FieldReader& r, std::string_view pointer, int64_t replicas) {
  if (replicas < 0) r.Fail(FieldPath(std::string(pointer)) + ": must be >= 0");
  if (replicas > std::numeric_limits<int32_t>::max()) {
    r.Fail(FieldPath(std::string(pointer)) + ": must be at most 2147483647");
  }
}

// The power of two or of ten a quantity's suffix stands for: binary Ki..Ei, decimal n u m "" k M G
// T P E, or an exponent (e or E, then a signed integer within int32). False when it is none.
bool QuantitySuffix(std::string_view suffix, int* pow2, int64_t* pow10) {
  static constexpr std::pair<std::string_view, int> kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30},
                                                                 {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  static constexpr std::pair<std::string_view, int> kDecimal[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"", 0},
                                                                  {"k", 3},  {"M", 6},  {"G", 9},  {"T", 12},
                                                                  {"P", 15}, {"E", 18}};
  for (const auto& [name, p] : kBinary) {
    if (suffix == name) return *pow2 = p, true;
  }
  for (const auto& [name, p] : kDecimal) {
    if (suffix == name) return *pow10 = p, true;
  }
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return false;
  const bool minus = suffix[1] == '-';
  const std::string_view digits = suffix.substr(suffix[1] == '+' || minus ? 2 : 1);
  int64_t e = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), e);
  if (digits.empty() || digits[0] == '-' || ec != std::errc() || end != digits.data() + digits.size() ||
      e > (minus ? 2147483648 : 2147483647)) {
    return false;
  }
  *pow10 = minus ? -e : e;
  return true;
}

void ReadPool(FieldReader& r, std::string_view base, PoolSpec* out) {
  out->replicas = r.Int(P(base, "replicas"), out->replicas);
  out->tensor_parallel = r.Int(P(base, "tensorParallel"), out->tensor_parallel);
  out->weights = r.String(P(base, "weights"), out->weights);
  out->kv_cache = r.String(P(base, "kvCache"), out->kv_cache);
  if (const json* resources = r.Object(P(base, "resources"))) out->resources = *resources;
  if (const json* selector = r.Object(P(base, "nodeSelector"))) out->node_selector = *selector;
  if (const json* autoscaling = r.Object(P(base, "autoscaling"))) {
    out->autoscaling = *autoscaling;
    StatusOr<AutoscalePolicy> policy = ParseAutoscalePolicy(*autoscaling, FieldPath(P(base, "autoscaling")));
    if (policy.ok()) {
      out->autoscale = *policy;
    } else {
      r.Fail(policy.status().message());
    }
  }
  if (const json* root = r.Object(base); root && root->contains("kvCacheMemory")) {
    out->kv_cache_memory = root->at("kvCacheMemory");
    StatusOr<int64_t> bytes = ParseQuantityBytes(out->kv_cache_memory);
    if (!bytes.ok())
      r.Fail(FieldPath(P(base, "kvCacheMemory")) + ": " + bytes.status().message());
    else
      out->kv_cache_bytes = *bytes;
  }

  out->termination_grace_seconds =
      r.Int(P(base, "terminationGracePeriodSeconds"), out->termination_grace_seconds);
  if (out->termination_grace_seconds <= kDrainMarginSeconds || out->termination_grace_seconds > 3600) {
    r.Fail(FieldPath(P(base, "terminationGracePeriodSeconds")) + ": " +
           std::to_string(out->termination_grace_seconds) + " is not in " +
           std::to_string(kDrainMarginSeconds + 1) + "..3600");
  }

  CheckReplicas(r, P(base, "replicas"), out->replicas);
  CheckResources(r, P(base, "resources"), out->resources);
  int64_t tp = out->tensor_parallel;
  if (tp < 1 || tp > 64 || (tp & (tp - 1)) != 0) {
    r.Fail(FieldPath(P(base, "tensorParallel")) + ": " + std::to_string(tp) +
           " is not a power of two from 1 to 64");
  }
  if (out->weights != "bf16" && out->weights != "fp8" && out->weights != "int4") {
    r.Fail(FieldPath(P(base, "weights")) + ": '" + out->weights + "' is not bf16, fp8 or int4");
  }
  if (out->kv_cache != "bf16" && out->kv_cache != "fp8_e4m3") {
    r.Fail(FieldPath(P(base, "kvCache")) + ": '" + out->kv_cache + "' is not bf16 or fp8_e4m3");
  }
  int64_t gpus = RequestedGpus(r, base, out->resources);
  if (gpus > 0 && gpus != tp) {
    r.Fail(FieldPath(P(base, "resources")) + ": asks for " + std::to_string(gpus) +
           " GPUs per pod but tensorParallel is " + std::to_string(tp));
  }
  out->gpus = gpus > 0 ? tp : 0;
}

void ReadCommon(FieldReader& r, const PlanOptions& options, CommonSpec* out) {
  out->model_name = r.String("/spec/model/name", "");
  out->model_path = r.String("/spec/model/path", "");
  if (const json* volume = r.Object("/spec/model/volume")) out->model_volume = *volume;
  bool dummy = r.Object("/spec/model/dummy") != nullptr;
  if (dummy) {
    out->dummy_preset = r.String("/spec/model/dummy/preset", "");
    out->dummy_seed = r.Int("/spec/model/dummy/seed", 0);
    if (out->dummy_preset.empty()) r.Fail("spec.model.dummy.preset: missing");
    // The CRD's minimum; the agent reads the seed as an unsigned integer and refuses a negative one.
    if (out->dummy_seed < 0)
      r.Fail("spec.model.dummy.seed: " + std::to_string(out->dummy_seed) + " is negative");
  }
  if (out->model_path.empty() == !dummy) r.Fail("spec.model: set exactly one of path and dummy");
  if (!out->model_volume.is_null()) {
    out->mount_path = r.String("/spec/model/volume/mountPath", "/models");
    bool pvc = r.Object("/spec/model/volume/persistentVolumeClaim") != nullptr;
    bool host = r.Object("/spec/model/volume/hostPath") != nullptr;
    if (pvc == host) r.Fail("spec.model.volume: set exactly one of persistentVolumeClaim and hostPath");
    if (pvc) {
      out->claim_name = r.String("/spec/model/volume/persistentVolumeClaim/claimName", "");
      out->claim_read_only = r.Bool("/spec/model/volume/persistentVolumeClaim/readOnly", true);
      if (out->claim_name.empty()) r.Fail("spec.model.volume.persistentVolumeClaim.claimName: missing");
    }
    if (host) {
      out->host_path = r.String("/spec/model/volume/hostPath/path", "");
      if (out->host_path.empty()) r.Fail("spec.model.volume.hostPath.path: missing");
    }
    const std::string& mount = out->mount_path;
    if (mount.empty() || mount[0] != '/' || out->model_path.rfind(mount, 0) != 0) {
      r.Fail("spec.model.path: must lie under spec.model.volume.mountPath (" + mount + ")");
    }
  }
  if (r.Object("/spec/tls") != nullptr) {
    out->tls_secret = r.String("/spec/tls/secretName", "");
    out->tls_server_name = r.String("/spec/tls/serverName", out->tls_server_name);
    if (out->tls_secret.empty()) r.Fail("spec.tls.secretName: missing");
    if (out->tls_server_name.empty()) r.Fail("spec.tls.serverName: empty");
  }
  out->page_tags = r.Bool("/spec/integrity/pageTags", true);
  out->transfer_checksum = r.Bool("/spec/integrity/transferChecksum", true);
  out->image = r.String("/spec/image", options.default_image);
  if (out->image.empty()) r.Fail("spec.image: empty, and tandem-controller has no --agent-image");
  out->image_pull_policy = r.String("/spec/imagePullPolicy", "");
  if (auto* spec = r.Object("/spec"); spec && spec->contains("imagePullSecrets")) {
    const json& secrets = spec->at("imagePullSecrets");
    if (!secrets.is_array()) {
      r.Fail("spec.imagePullSecrets: want a list");
    } else {
      for (size_t i = 0; i < secrets.size(); ++i) {
        const json& name = secrets[i].is_object() ? secrets[i].value("name", json()) : json();
        if (!name.is_string() || name.get<std::string>().empty())
          r.Fail("spec.imagePullSecrets." + std::to_string(i) + ".name: want a Secret name");
      }
      out->image_pull_secrets = secrets;
    }
  }
}

}  // namespace

StatusOr<int64_t> ParseQuantityBytes(const json& q) {
  if (q.is_number_unsigned()) {
    if (q.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument(q.dump() + " is too large");
    }
    return q.get<int64_t>();
  }
  if (q.is_number_integer()) {
    if (q.get<int64_t>() < 0) return Status::InvalidArgument("negative quantity");
    return q.get<int64_t>();
  }
  if (!q.is_string()) return Status::InvalidArgument("want a quantity such as 40Gi");
  // Kubernetes' grammar: a sign, digits with at most one '.', then a suffix (QuantitySuffix).
  const std::string& s = q.get_ref<const std::string&>();
  const std::string quoted = "'" + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "'";
  const size_t start = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  size_t i = start, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) ++digits;
  }
  int pow2 = 0;
  int64_t pow10 = 0;
  if (digits == 0 || !QuantitySuffix(std::string_view(s).substr(i), &pow2, &pow10)) {
    return Status::InvalidArgument(quoted + " is not a quantity such as 40Gi");
  }
  // strtold of "<number>e<pow10>", not stold: correctly rounded, and thousands of digits or a
  // huge exponent overflow to HUGE_VALL (or underflow towards 0) instead of throwing.
  const std::string decimal = s.substr(start, i - start) + "e" + std::to_string(pow10);
  const long double value = std::ldexp(std::strtold(decimal.c_str(), nullptr), pow2);
  // By the digits, not by `value`: "-764E-7616" underflows to 0 but is still below zero.
  const bool nonzero = s.substr(start, i - start).find_first_not_of("0.") != std::string::npos;
  if (s[0] == '-' && nonzero) return Status::InvalidArgument(quoted + ": negative quantity");
  const long double bytes = std::ceil(value);  // as resource.Quantity.Value(): rounded up
  if (!(bytes <= 9.2e18L)) return Status::InvalidArgument(quoted + " is too large");
  return static_cast<int64_t>(bytes);
}

namespace {

// spec.rollout.qualityGate. Its canary stack is named "<name>-gate", whose pools must fit a
// StatefulSet name as the deployment's own do: the name is at most 39 characters then.
void ReadQualityGate(FieldReader& r, const DeploymentSpec& s, QualityGateSpec* g) {
  if (r.Object("/spec/rollout/qualityGate") == nullptr) return;
  constexpr std::string_view kGate = "/spec/rollout/qualityGate";
  g->enabled = true;
  g->suite = r.String(P(kGate, "suite"), "");
  g->min_validity = r.Number(P(kGate, "minValidity"), g->min_validity);
  g->max_validity_drop = r.Number(P(kGate, "maxValidityDrop"), g->max_validity_drop);
  g->cases = r.Int(P(kGate, "cases"), g->cases);
  g->max_tokens = r.Int(P(kGate, "maxTokens"), g->max_tokens);
  const std::string at = "spec.rollout.qualityGate";
  if (s.name.size() + 5 > kMaxDeploymentName) {
    r.Fail("metadata.name: '" + s.name +
           "' is longer than 39 characters, too long for the quality gate's canary "
           "pools (<name>-gate-prefill)");
  }
  if (g->suite.empty() || g->suite.front() != '/') {
    r.Fail(at + ".suite: want an absolute path to a suite file inside the model volume");
  } else if (s.common.model_volume.is_null() ||
             g->suite.rfind(
                 s.common.mount_path.back() == '/' ? s.common.mount_path : s.common.mount_path + "/", 0) !=
                 0) {
    r.Fail(at + ".suite: '" + g->suite +
           "' must lie under model.volume.mountPath (the eval Pod mounts the "
           "model volume)");
  }
  if (!(g->min_validity >= 0 && g->min_validity <= 1)) r.Fail(at + ".minValidity: want a number in 0..1");
  if (!(g->max_validity_drop >= 0 && g->max_validity_drop <= 100))
    r.Fail(at + ".maxValidityDrop: want points in 0..100");
  if (g->cases < 0) r.Fail(at + ".cases: want 0 (all) or more");
  if (g->max_tokens < 1 || g->max_tokens > 65536) r.Fail(at + ".maxTokens: want 1..65536");
}

}  // namespace

StatusOr<DeploymentSpec> ParseDeploymentSpec(const json& mdep, const PlanOptions& options) {
  FieldReader r(mdep);
  DeploymentSpec s;
  if (r.String("/apiVersion", "").empty() || r.String("/kind", "").empty())
    r.Fail("apiVersion and kind: missing");
  s.name = r.String("/metadata/name", "");
  s.ns = r.String("/metadata/namespace", "default");
  if (r.String("/metadata/uid", "").empty()) r.Fail("metadata.uid: missing (not read from the API server?)");
  if (!IsDns1035Label(s.name)) {
    r.Fail("metadata.name: '" + s.name +
           "' must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter): "
           "it names the router Service");
  } else if (s.name.size() > kMaxDeploymentName) {
    r.Fail("metadata.name: '" + s.name +
           "' is longer than 44 characters, too long for the pools' "
           "StatefulSets");
  }
  if (r.Object("/spec") == nullptr)
    return r.status().ok() ? Status::InvalidArgument("spec: missing") : r.status();
  ReadCommon(r, options, &s.common);

  s.router_replicas = r.Int("/spec/router/replicas", s.router_replicas);
  s.router_port = r.Int("/spec/router/port", s.router_port);
  if (const json* res = r.Object("/spec/router/resources")) s.router_resources = *res;
  s.api_key_secret = r.String("/spec/router/auth/apiKeySecret/name", "");
  s.api_key_key = r.String("/spec/router/auth/apiKeySecret/key", s.api_key_key);
  const std::string unknown_tools = r.String("/spec/router/unknownToolCalls", "drop");
  if (unknown_tools != "drop" && unknown_tools != "forward")
    r.Fail("spec.router.unknownToolCalls: '" + unknown_tools + "' is not drop or forward");
  s.forward_unknown_tool_calls = unknown_tools == "forward";
  CheckReplicas(r, "/spec/router/replicas", s.router_replicas);
  CheckResources(r, "/spec/router/resources", s.router_resources);
  if (s.router_port < 1 || s.router_port > 65535) {
    r.Fail("spec.router.port: " + std::to_string(s.router_port) + " is not in 1..65535");
  } else if (s.router_port == kGrpcPort || s.router_port == kMetricsPort) {
    r.Fail("spec.router.port: " + std::to_string(s.router_port) +
           " clashes with the agent's gRPC or metrics port");
  }
  if (const json* spec = r.Object("/spec");
      spec && spec->contains("gpuBudget") && !spec->at("gpuBudget").is_null()) {
    s.gpu_budget = r.Int("/spec/gpuBudget", 0);
    CheckReplicas(r, "/spec/gpuBudget", *s.gpu_budget);
  }
  s.prefill.role = "prefill";
  s.decode.role = "decode";
  ReadPool(r, "/spec/prefill", &s.prefill);
  ReadPool(r, "/spec/decode", &s.decode);
  ReadQualityGate(r, s, &s.quality_gate);
  if (!r.status().ok()) return r.status();
  return s;
}

StatusOr<ModelPoolSpec> ParseModelPoolSpec(const json& pool, const PlanOptions& options) {
  FieldReader r(pool);
  ModelPoolSpec s;
  if (r.String("/apiVersion", "").empty() || r.String("/kind", "").empty())
    r.Fail("apiVersion and kind: missing");
  s.name = r.String("/metadata/name", "");
  s.ns = r.String("/metadata/namespace", "default");
  if (r.String("/metadata/uid", "").empty()) r.Fail("metadata.uid: missing (not read from the API server?)");
  if (s.name.empty() || s.name.size() > 52 || !IsDns1035Label(s.name)) {
    r.Fail("metadata.name: '" + s.name + "' must be a DNS-1035 label of at most 52 characters");
  }
  if (r.Object("/spec") == nullptr)
    return r.status().ok() ? Status::InvalidArgument("spec: missing") : r.status();
  s.deployment_name = r.String("/spec/deploymentName", "");
  if (s.deployment_name.empty()) r.Fail("spec.deploymentName: missing");
  s.pool.role = r.String("/spec/role", "");
  if (s.pool.role != "prefill" && s.pool.role != "decode") {
    r.Fail("spec.role: '" + s.pool.role + "' is not prefill or decode");
  }
  ReadCommon(r, options, &s.common);
  ReadPool(r, "/spec", &s.pool);
  if (!r.status().ok()) return r.status();
  return s;
}

}  // namespace tandem::controller::reconcile
