#include "controller/kube/resource.h"

namespace tandem::controller::kube {

std::string ResourceRef::ApiVersion() const { return group.empty() ? version : group + "/" + version; }

std::string ResourceRef::GroupResource() const { return group.empty() ? resource : resource + "." + group; }

const ResourceRef kModelDeployment{"tandem.dev", "v1alpha1", "modeldeployments", "ModelDeployment", true};
const ResourceRef kModelPool{"tandem.dev", "v1alpha1", "modelpools", "ModelPool", true};
const ResourceRef kStatefulSet{"apps", "v1", "statefulsets", "StatefulSet", true};
const ResourceRef kDeployment{"apps", "v1", "deployments", "Deployment", true};
const ResourceRef kService{"", "v1", "services", "Service", true};
const ResourceRef kConfigMap{"", "v1", "configmaps", "ConfigMap", true};
const ResourceRef kSecret{"", "v1", "secrets", "Secret", true};
const ResourceRef kPodDisruptionBudget{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true};
const ResourceRef kPod{"", "v1", "pods", "Pod", true};
const ResourceRef kEvent{"", "v1", "events", "Event", true};
const ResourceRef kLease{"coordination.k8s.io", "v1", "leases", "Lease", true};
const ResourceRef kNamespace{"", "v1", "namespaces", "Namespace", false};
const ResourceRef kCustomResourceDefinition{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                            "CustomResourceDefinition", false};

std::string UrlEscape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string ResourcePath(const ResourceRef& ref, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  std::string path = ref.group.empty() ? "/api/" + ref.version : "/apis/" + ref.group + "/" + ref.version;
  if (ref.namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += UrlEscape(ns);
  }
  path += "/";
  path += ref.resource;
  if (!name.empty()) {
    path += "/";
    path += UrlEscape(name);
    if (!subresource.empty()) {
      path += "/";
      path += subresource;
    }
  }
  return path;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? "?" : "&";
    out += UrlEscape(key);
    out += "=";
    out += UrlEscape(value);
  }
  return out;
}

}  // namespace tandem::controller::kube
