#include "controller/reconcile/objects.h"

#include <array>
#include <cstdio>

namespace tandem::controller::reconcile {
namespace {

constexpr std::array<KindInfo, 9> kKinds = {{
    {"tandem.dev", "v1alpha1", "modeldeployments", "ModelDeployment", true},
    {"tandem.dev", "v1alpha1", "modelpools", "ModelPool", true},
    {"apps", "v1", "statefulsets", "StatefulSet", true},
    {"", "v1", "services", "Service", true},
    {"", "v1", "configmaps", "ConfigMap", true},
    {"apps", "v1", "deployments", "Deployment", true},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true},
    {"", "v1", "pods", "Pod", true},
    {"", "v1", "events", "Event", true},
}};

}  // namespace

std::string KindInfo::ApiVersion() const {
  if (group.empty()) return std::string(version);
  return std::string(group) + "/" + std::string(version);
}

const KindInfo& InfoOf(Kind kind) { return kKinds[static_cast<size_t>(kind)]; }

StatusOr<Kind> KindOfObject(const json& object) {
  if (!object.is_object()) return Status::InvalidArgument("object is not a JSON object");
  auto api_version = object.find("apiVersion");
  auto kind = object.find("kind");
  if (api_version == object.end() || kind == object.end() || !api_version->is_string() ||
      !kind->is_string()) {
    return Status::InvalidArgument("object lacks apiVersion or kind");
  }
  for (size_t i = 0; i < kKinds.size(); ++i) {
    if (kKinds[i].ApiVersion() == api_version->get<std::string>() &&
        kKinds[i].kind == kind->get<std::string>()) {
      return static_cast<Kind>(i);
    }
  }
  return Status::NotFound("kind " + api_version->get<std::string>() + "/" + kind->get<std::string>() +
                          " is not one the controller manages");
}

json CommonLabels(std::string_view deployment, std::string_view component) {
  return json{
      {"app.kubernetes.io/name", "tandem"},        {"app.kubernetes.io/instance", deployment},
      {"app.kubernetes.io/component", component},  {"app.kubernetes.io/managed-by", kManagedBy},
      {std::string(kDeploymentLabel), deployment},
  };
}

json ControllerReference(const json& owner) {
  const json& meta = owner.at("metadata");
  return json{
      {"apiVersion", owner.at("apiVersion")},
      {"kind", owner.at("kind")},
      {"name", meta.at("name")},
      {"uid", meta.at("uid")},
      {"controller", true},
      {"blockOwnerDeletion", true},
  };
}

std::string ControllerUid(const json& object) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return "";
  for (const json& ref : *refs) {
    if (!ref.is_object()) continue;
    auto controller = ref.find("controller");
    auto uid = ref.find("uid");
    if (controller != ref.end() && controller->is_boolean() && controller->get<bool>() && uid != ref.end() &&
        uid->is_string()) {
      return uid->get<std::string>();
    }
  }
  return "";
}

bool IsControlledBy(const json& object, std::string_view owner_uid) {
  return !owner_uid.empty() && ControllerUid(object) == owner_uid;
}

std::string ContentHash(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string ObjectKey(const json& object) {
  FieldReader r(object);
  std::string ns = r.String("/metadata/namespace", "");
  std::string name = r.String("/metadata/name", "");
  return ns.empty() ? name : ns + "/" + name;
}

std::string FieldPath(std::string_view pointer) {
  std::string out(pointer.substr(pointer.empty() || pointer[0] != '/' ? 0 : 1));
  for (char& c : out) {
    if (c == '/') c = '.';
  }
  return out;
}

const json* FieldReader::Find(std::string_view pointer) const {
  const json* node = &root_;
  std::string_view rest = pointer;
  while (!rest.empty()) {
    if (rest[0] == '/') rest.remove_prefix(1);
    size_t end = rest.find('/');
    std::string key(rest.substr(0, end));
    if (!node->is_object()) return nullptr;
    auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  return node->is_null() ? nullptr : node;
}

void FieldReader::WrongType(std::string_view pointer, std::string_view want) {
  Fail(FieldPath(pointer) + ": want " + std::string(want));
}

void FieldReader::Fail(std::string message) {
  if (status_.ok()) status_ = Status::InvalidArgument(std::move(message));
}

std::string FieldReader::String(std::string_view pointer, std::string fallback) {
  const json* v = Find(pointer);
  if (v == nullptr) return fallback;
  if (!v->is_string()) {
    WrongType(pointer, "a string");
    return fallback;
  }
  return v->get<std::string>();
}

int64_t FieldReader::Int(std::string_view pointer, int64_t fallback) {
  const json* v = Find(pointer);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) {
    WrongType(pointer, "an integer");
    return fallback;
  }
  return v->get<int64_t>();
}

double FieldReader::Number(std::string_view pointer, double fallback) {
  const json* v = Find(pointer);
  if (v == nullptr) return fallback;
  if (!v->is_number()) {
    WrongType(pointer, "a number");
    return fallback;
  }
  return v->get<double>();
}

bool FieldReader::Bool(std::string_view pointer, bool fallback) {
  const json* v = Find(pointer);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    WrongType(pointer, "true or false");
    return fallback;
  }
  return v->get<bool>();
}

const json* FieldReader::Object(std::string_view pointer) {
  const json* v = Find(pointer);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    WrongType(pointer, "an object");
    return nullptr;
  }
  return v;
}

}  // namespace tandem::controller::reconcile
