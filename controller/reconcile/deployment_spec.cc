#include "controller/reconcile/deployment_spec.h"

#include <cctype>
#include <cmath>
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

void ReadPool(FieldReader& r, std::string_view base, PoolSpec* out) {
  out->replicas = r.Int(P(base, "replicas"), out->replicas);
  out->tensor_parallel = r.Int(P(base, "tensorParallel"), out->tensor_parallel);
  out->weights = r.String(P(base, "weights"), out->weights);
  out->kv_cache = r.String(P(base, "kvCache"), out->kv_cache);
  if (const json* resources = r.Object(P(base, "resources"))) out->resources = *resources;
  if (const json* selector = r.Object(P(base, "nodeSelector"))) out->node_selector = *selector;
  if (const json* autoscaling = r.Object(P(base, "autoscaling"))) {
    out->autoscaling = *autoscaling;
    out->autoscaling_enabled = r.Bool(P(base, "autoscaling/enabled"), false);
  }
  if (const json* root = r.Object(base); root && root->contains("kvCacheMemory")) {
    out->kv_cache_memory = root->at("kvCacheMemory");
    StatusOr<int64_t> bytes = ParseQuantityBytes(out->kv_cache_memory);
    if (!bytes.ok())
      r.Fail(FieldPath(P(base, "kvCacheMemory")) + ": " + bytes.status().message());
    else
      out->kv_cache_bytes = *bytes;
  }

  if (out->replicas < 0) r.Fail(FieldPath(P(base, "replicas")) + ": must be >= 0");
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
  out->page_tags = r.Bool("/spec/integrity/pageTags", true);
  out->transfer_checksum = r.Bool("/spec/integrity/transferChecksum", true);
  out->image = r.String("/spec/image", options.default_image);
  if (out->image.empty()) r.Fail("spec.image: empty, and tandem-controller has no --agent-image");
  out->image_pull_policy = r.String("/spec/imagePullPolicy", "");
  if (auto* spec = r.Object("/spec"); spec && spec->contains("imagePullSecrets")) {
    const json& secrets = spec->at("imagePullSecrets");
    if (!secrets.is_array())
      r.Fail("spec.imagePullSecrets: want a list");
    else
      out->image_pull_secrets = secrets;
  }
}

}  // namespace

StatusOr<int64_t> ParseQuantityBytes(const json& q) {
  if (q.is_number_integer()) {
    if (q.get<int64_t>() < 0) return Status::InvalidArgument("negative quantity");
    return q.get<int64_t>();
  }
  if (!q.is_string()) return Status::InvalidArgument("want a quantity such as 40Gi");
  const std::string& s = q.get_ref<const std::string&>();
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string number = s.substr(0, i), suffix = s.substr(i);
  static const std::pair<const char*, long double> kSuffixes[] = {{"", 1},
                                                                  {"k", 1e3L},
                                                                  {"M", 1e6L},
                                                                  {"G", 1e9L},
                                                                  {"T", 1e12L},
                                                                  {"P", 1e15L},
                                                                  {"E", 1e18L},
                                                                  {"Ki", 1024.0L},
                                                                  {"Mi", 1048576.0L},
                                                                  {"Gi", 1073741824.0L},
                                                                  {"Ti", 1099511627776.0L},
                                                                  {"Pi", 1125899906842624.0L},
                                                                  {"Ei", 1152921504606846976.0L}};
  long double scale = -1;
  for (const auto& [name, value] : kSuffixes) {
    if (suffix == name) scale = value;
  }
  if (number.empty() || number == "." || number.find('.') != number.rfind('.') || scale < 0) {
    return Status::InvalidArgument("'" + s + "' is not a quantity such as 40Gi");
  }
  long double bytes = std::ceil(std::stold(number) * scale);
  if (bytes > 9.2e18L) return Status::InvalidArgument("'" + s + "' is too large");
  return static_cast<int64_t>(bytes);
}

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
  if (s.router_replicas < 0) r.Fail("spec.router.replicas: must be >= 0");
  if (s.router_port < 1 || s.router_port > 65535) {
    r.Fail("spec.router.port: " + std::to_string(s.router_port) + " is not in 1..65535");
  } else if (s.router_port == kGrpcPort || s.router_port == kMetricsPort) {
    r.Fail("spec.router.port: " + std::to_string(s.router_port) +
           " clashes with the agent's gRPC or metrics port");
  }
  s.prefill.role = "prefill";
  s.decode.role = "decode";
  ReadPool(r, "/spec/prefill", &s.prefill);
  ReadPool(r, "/spec/decode", &s.decode);
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
