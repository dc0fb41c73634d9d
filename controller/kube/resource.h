#pragma once
// Naming Kubernetes resources and building their REST paths. Pure functions; no I/O.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::controller::kube {

// One REST resource: group "" is the core API (/api/v1), others live under /apis/<group>/<version>.
struct ResourceRef {
  std::string group;     // "", "apps", "tandem.dev"
  std::string version;   // "v1", "v1alpha1"
  std::string resource;  // plural, lower case: "statefulsets"
  std::string kind;      // "StatefulSet"
  bool namespaced = true;

  // "v1" for the core group, else "group/version": the objects' apiVersion field.
  std::string ApiVersion() const;
  // "statefulsets.apps", "pods": for messages and cache keys.
  std::string GroupResource() const;
};

// The resources the controller uses.
extern const ResourceRef kModelDeployment;           // tandem.dev/v1alpha1 modeldeployments
extern const ResourceRef kModelPool;                 // tandem.dev/v1alpha1 modelpools
extern const ResourceRef kStatefulSet;               // apps/v1
extern const ResourceRef kDeployment;                // apps/v1
extern const ResourceRef kService;                   // v1
extern const ResourceRef kConfigMap;                 // v1
extern const ResourceRef kSecret;                    // v1
extern const ResourceRef kPodDisruptionBudget;       // policy/v1
extern const ResourceRef kPod;                       // v1
extern const ResourceRef kEvent;                     // v1 (core events)
extern const ResourceRef kLease;                     // coordination.k8s.io/v1
extern const ResourceRef kNamespace;                 // v1, cluster-scoped
extern const ResourceRef kCustomResourceDefinition;  // apiextensions.k8s.io/v1, cluster-scoped

// The path of a collection or an object:
//   /api/v1/namespaces/<ns>/pods[/<name>[/<subresource>]]
//   /apis/apps/v1/statefulsets  (all namespaces: ns empty), cluster-scoped ones ignore ns.
// Name and namespace are path-escaped. An empty name with a subresource is a caller bug (the
// subresource is then dropped).
std::string ResourcePath(const ResourceRef& ref, std::string_view ns, std::string_view name = "",
                         std::string_view subresource = "");

// Percent-encodes everything but unreserved characters (RFC 3986): for query values such as
// label selectors ("app in (a,b)" -> "app%20in%20%28a%2Cb%29").
std::string UrlEscape(std::string_view text);

// "?k1=v1&k2=v2" with escaped values, skipping pairs whose value is empty; "" when none remain.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace tandem::controller::kube
