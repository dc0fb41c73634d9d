#include "controller/kube/resource.h"

#include <gtest/gtest.h>

namespace tandem::controller::kube {
namespace {

TEST(ResourcePath, CoreAndGroupedNamespacedAndClusterScoped) {
  EXPECT_EQ(ResourcePath(kPod, "ns1"), "/api/v1/namespaces/ns1/pods");
  EXPECT_EQ(ResourcePath(kPod, ""), "/api/v1/pods");
  EXPECT_EQ(ResourcePath(kPod, "ns1", "p-0"), "/api/v1/namespaces/ns1/pods/p-0");
  EXPECT_EQ(ResourcePath(kStatefulSet, "a", "db", "scale"),
            "/apis/apps/v1/namespaces/a/statefulsets/db/scale");
  EXPECT_EQ(ResourcePath(kModelPool, "a", "p", "status"),
            "/apis/tandem.dev/v1alpha1/namespaces/a/modelpools/p/status");
  EXPECT_EQ(ResourcePath(kNamespace, "ignored", "kube-system"), "/api/v1/namespaces/kube-system");
  EXPECT_EQ(ResourcePath(kCustomResourceDefinition, "", "modelpools.tandem.dev"),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/modelpools.tandem.dev");
  EXPECT_EQ(ResourcePath(kLease, "tandem-system", "tandem-controller"),
            "/apis/coordination.k8s.io/v1/namespaces/tandem-system/leases/tandem-controller");
  EXPECT_EQ(ResourcePath(kPodDisruptionBudget, "x"), "/apis/policy/v1/namespaces/x/poddisruptionbudgets");
}

TEST(ResourcePath, EscapesNames) {
  EXPECT_EQ(ResourcePath(kConfigMap, "n s", "a/b"), "/api/v1/namespaces/n%20s/configmaps/a%2Fb");
}

TEST(ResourceRef, ApiVersionAndGroupResource) {
  EXPECT_EQ(kService.ApiVersion(), "v1");
  EXPECT_EQ(kDeployment.ApiVersion(), "apps/v1");
  EXPECT_EQ(kModelDeployment.ApiVersion(), "tandem.dev/v1alpha1");
  EXPECT_EQ(kModelDeployment.GroupResource(), "modeldeployments.tandem.dev");
  EXPECT_EQ(kSecret.GroupResource(), "secrets");
  EXPECT_EQ(kEvent.kind, "Event");
  EXPECT_FALSE(kNamespace.namespaced);
  EXPECT_TRUE(kModelPool.namespaced);
}

TEST(QueryString, EscapesSelectorsAndSkipsEmptyValues) {
  EXPECT_EQ(UrlEscape("app in (a,b),tier!=x"), "app%20in%20%28a%2Cb%29%2Ctier%21%3Dx");
  EXPECT_EQ(QueryString({{"labelSelector", "app=x"}, {"limit", ""}, {"continue", "tok/+="}}),
            "?labelSelector=app%3Dx&continue=tok%2F%2B%3D");
  EXPECT_EQ(QueryString({{"limit", ""}}), "");
}

}  // namespace
}  // namespace tandem::controller::kube
