// The Manager (informers, work queues, both reconcilers, KubeStore) against kube-sim with faults:
// 30% of updates conflict, every watch ends with 410 Gone after 25 events, 1% of events cut the
// connection. Deployments converge, and afterwards every informer's cache holds exactly the
// server's objects at the server's resourceVersions (after the relists the faults forced).
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "controller/kube/client.h"
#include "controller/kube/testing/kube_sim_process.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/kube_store.h"
#include "controller/reconcile/manager.h"
#include "controller/runtime/informer.h"

namespace tandem::controller::reconcile {
namespace {

constexpr int kDeployments = 20;

// YAML (as yaml-cpp reads it) to JSON: plain scalars become numbers, booleans or null when they
// read as such; quoted ones stay strings.
json ToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(ToJson(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  const std::string text = node.Scalar();
  if (node.Tag() == "?") {
    if (text == "true" || text == "false") return text == "true";
    json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_number()) return parsed;
  }
  return text;
}

Status InstallCrds(kube::Client& client) {
  for (const char* file : {"crds/tandem.dev_modeldeployments.yaml", "crds/tandem.dev_modelpools.yaml"}) {
    std::string path = std::string(TANDEM_SOURCE_DIR) + "/" + file;
    for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
      if (!doc.IsMap()) continue;
      StatusOr<json> created = client.Create(kube::kCustomResourceDefinition, "", ToJson(doc));
      if (!created.ok()) return created.status();
    }
  }
  return Status::Ok();
}

json Deployment(int i) {
  return json{{"apiVersion", "tandem.dev/v1alpha1"},
              {"kind", "ModelDeployment"},
              {"metadata", {{"name", "d" + std::to_string(i)}, {"namespace", "default"}}},
              {"spec", {{"model", {{"name", "tiny"}, {"dummy", {{"preset", "tiny"}, {"seed", i}}}}}}}};
}

int ReadyDeployments(kube::Client& client) {
  StatusOr<json> list = client.ListAll(ResourceOf(Kind::kModelDeployment), "default");
  if (!list.ok()) return -1;
  int ready = 0;
  for (const json& m : list->value("items", json::array())) {
    json status = m.value("status", json::object());
    if (ConditionIsTrue(status, kReady) &&
        status.value("observedGeneration", -1) == m["metadata"]["generation"]) {
      ++ready;
    }
  }
  return ready;
}

// "" when the informer's cache equals the server's objects (names and resourceVersions), else
// the first difference.
std::string CacheDiff(kube::Client& client, const runtime::Informer& informer) {
  const runtime::InformerOptions& o = informer.options();
  kube::ListOptions list_options;
  list_options.label_selector = o.label_selector;
  StatusOr<json> list = client.ListAll(o.resource, o.namespace_name, list_options);
  if (!list.ok()) return list.status().ToString();
  std::map<std::string, std::string> server, cache;
  for (const json& item : list->value("items", json::array())) {
    server[ObjectKey(item)] = item["metadata"].value("resourceVersion", "");
  }
  for (const runtime::ObjectPtr& obj : informer.List())
    cache[ObjectKey(*obj)] = (*obj)["metadata"].value("resourceVersion", "");
  if (server == cache) return "";
  for (const auto& [key, rv] : server) {
    auto it = cache.find(key);
    if (it == cache.end()) return o.resource.resource + " " + key + " missing from the cache";
    if (it->second != rv)
      return o.resource.resource + " " + key + " cached at " + it->second + ", server " + rv;
  }
  return o.resource.resource + ": the cache holds objects the server does not";
}

TEST(ManagerKube, ConvergesThroughFaultsAndCachesMatchTheServer) {
  kube::testing::KubeSimOptions sim_options;
  sim_options.auto_ready = true;
  sim_options.faults_json =
      R"({"conflict_percent": 30, "gone_every_events": 25, "drop_watch_percent": 1, "seed": 3})";
  sim_options.extra_args = {"--history", "3000"};
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, sim_options);
  std::unique_ptr<kube::Client> client = kube::Client::New(sim->config()).value();
  ASSERT_TRUE(InstallCrds(*client).ok());
  for (int i = 0; i < kDeployments; ++i) {
    ASSERT_TRUE(client->Create(ResourceOf(Kind::kModelDeployment), "default", Deployment(i)).ok());
  }

  metrics::ControllerMetrics metrics;
  ManagerOptions options;
  options.qps = 0;  // unlimited: this test is about faults, not the limiter
  Manager manager(client.get(), &metrics, options);
  manager.StartInformers();
  ASSERT_TRUE(manager.WaitForSync(std::chrono::seconds(30)));
  manager.StartWorkers();

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ReadyDeployments(*client) != kDeployments && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(ReadyDeployments(*client), kDeployments) << sim->Log();

  // Converged: the caches catch up with the server (watch events in flight are allowed to land).
  int64_t relists = 0;
  for (const runtime::Informer* informer : manager.informers()) {
    std::string diff = "not compared";
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!(diff = CacheDiff(*client, *informer)).empty() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(diff, "");
    relists += informer->Stats().relists;
  }
  EXPECT_GT(relists, 0) << "the 410 faults never forced a relist";
  std::string exposition = metrics.Serialize();
  EXPECT_NE(
      exposition.find(R"(tandem_controller_reconcile_total{controller="modeldeployment",result="success"})"),
      std::string::npos);
  EXPECT_NE(exposition.find(R"(result="requeue")"), std::string::npos) << "no conflict was ever retried";
  EXPECT_NE(exposition.find(R"(tandem_pool_replicas{deployment="d7",pool="decode",state="ready"} 1)"),
            std::string::npos)
      << exposition;
  manager.Stop();
}

// --resync-period: with no event at all, every cached deployment and pool is reconciled again.
TEST(ManagerKube, ResyncReconcilesEveryCachedObjectAgain) {
  kube::testing::KubeSimOptions sim_options;
  sim_options.auto_ready = true;
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, sim_options);
  std::unique_ptr<kube::Client> client = kube::Client::New(sim->config()).value();
  ASSERT_TRUE(InstallCrds(*client).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(client->Create(ResourceOf(Kind::kModelDeployment), "default", Deployment(i)).ok());
  }
  metrics::ControllerMetrics metrics;
  ManagerOptions options;
  options.resync_period = std::chrono::milliseconds(100);
  Manager manager(client.get(), &metrics, options);
  manager.StartInformers();
  ASSERT_TRUE(manager.WaitForSync(std::chrono::seconds(30)));
  manager.StartWorkers();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ReadyDeployments(*client) != 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(ReadyDeployments(*client), 2) << sim->Log();
  // Converged, so nothing but the resync moves the counter: 2 deployments + 4 pools a round.
  const int64_t before = manager.reconciles();
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (manager.reconciles() < before + 3 * 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(manager.reconciles(), before + 3 * 6);
  EXPECT_NE(metrics.Serialize().find(R"(tandem_controller_resyncs_total{controller="modelpool"})"),
            std::string::npos);
  manager.Stop();
}

}  // namespace
}  // namespace tandem::controller::reconcile
