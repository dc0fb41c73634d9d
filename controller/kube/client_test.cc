// The REST client against kube-sim: every verb, pagination, status mapping of real API errors,
// the write fence, token refresh, timeouts and concurrent callers.
#include "controller/kube/client.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "controller/kube/testing/kube_sim_process.h"

namespace tandem::controller::kube {
namespace {

std::unique_ptr<Client> Connect(const KubeConfig& config, ClientOptions options = {}) {
  StatusOr<std::unique_ptr<Client>> client = Client::New(config, std::move(options));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

Json ConfigMap(const std::string& name, Json data = Json::object(), Json labels = Json::object()) {
  return {{"metadata", {{"name", name}, {"labels", labels}}}, {"data", data}};
}

TEST(ClientKubeSim, CreateGetUpdatePatchDelete) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());

  StatusOr<Json> created = client->Create(kConfigMap, "default", ConfigMap("cm", {{"a", "1"}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created.value()["kind"], "ConfigMap");
  const std::string uid = created.value()["metadata"]["uid"];
  const std::string rv1 = created.value()["metadata"]["resourceVersion"];
  EXPECT_FALSE(uid.empty());

  EXPECT_EQ(client->Create(kConfigMap, "default", ConfigMap("cm")).status().code(),
            StatusCode::kAlreadyExists);

  StatusOr<Json> got = client->Get(kConfigMap, "default", "cm");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value()["data"]["a"], "1");

  Json changed = got.value();
  changed["data"]["a"] = "2";
  StatusOr<Json> updated = client->Update(kConfigMap, "default", changed);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_NE(updated.value()["metadata"]["resourceVersion"], rv1);

  // The same stale resourceVersion again: a conflict.
  changed["data"]["a"] = "3";
  Status stale = client->Update(kConfigMap, "default", changed).status();
  EXPECT_EQ(stale.code(), StatusCode::kAborted) << stale.ToString();
  EXPECT_NE(stale.message().find("PUT /api/v1/namespaces/default/configmaps/cm: 409"), std::string::npos)
      << stale.ToString();
  EXPECT_NE(stale.message().find("the object has been modified"), std::string::npos) << stale.ToString();

  StatusOr<Json> patched =
      client->Patch(kConfigMap, "default", "cm", {{"data", {{"a", nullptr}, {"b", "x"}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_FALSE(patched.value()["data"].contains("a"));
  EXPECT_EQ(patched.value()["data"]["b"], "x");

  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "not-" + uid;
  EXPECT_EQ(client->Delete(kConfigMap, "default", "cm", wrong_uid).code(), StatusCode::kAborted);
  DeleteOptions right;
  right.precondition_uid = uid;
  right.propagation_policy = "Background";
  ASSERT_TRUE(client->Delete(kConfigMap, "default", "cm", right).ok());
  EXPECT_EQ(client->Get(kConfigMap, "default", "cm").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client->Delete(kConfigMap, "default", "cm").code(), StatusCode::kNotFound);

  const RequestCounts counts = client->Counts();
  EXPECT_EQ(counts.by_verb.at("create"), 2u);
  EXPECT_EQ(counts.by_verb.at("get"), 2u);
  EXPECT_EQ(counts.by_verb.at("update"), 2u);
  EXPECT_EQ(counts.by_verb.at("patch"), 1u);
  EXPECT_EQ(counts.by_verb.at("delete"), 3u);
  EXPECT_EQ(counts.Total(), 10u);
}

TEST(ClientKubeSim, NamespaceFromTheObjectAndErrors) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  Json cm = ConfigMap("in-meta");
  cm["metadata"]["namespace"] = "default";
  ASSERT_TRUE(client->Create(kConfigMap, "", cm).ok());
  EXPECT_EQ(client->Create(kConfigMap, "", ConfigMap("nowhere")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Get(kConfigMap, "default", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Update(kConfigMap, "default", Json::object()).status().code(),
            StatusCode::kInvalidArgument);
  // A namespace that does not exist: the server's 404 comes back as NotFound.
  EXPECT_EQ(client->Create(kConfigMap, "no-such-ns", ConfigMap("x")).status().code(), StatusCode::kNotFound);
}

TEST(ClientKubeSim, UpdateStatusAndScaleSubresources) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  Json svc = {{"metadata", {{"name", "svc"}}},
              {"spec", {{"ports", Json::array({{{"port", 80}}})}, {"selector", {{"app", "x"}}}}}};
  StatusOr<Json> created = client->Create(kService, "default", svc);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Json with_status = created.value();
  with_status["status"] = {{"loadBalancer", {{"ingress", Json::array({{{"ip", "1.2.3.4"}}})}}}};
  with_status["spec"]["ports"][0]["port"] = 81;  // ignored by the status subresource
  StatusOr<Json> written = client->UpdateStatus(kService, "default", with_status);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written.value()["status"]["loadBalancer"]["ingress"][0]["ip"], "1.2.3.4");
  EXPECT_EQ(written.value()["spec"]["ports"][0]["port"], 80);

  Json sts = {{"metadata", {{"name", "db"}}},
              {"spec",
               {{"replicas", 1},
                {"serviceName", "db"},
                {"selector", {{"matchLabels", {{"app", "db"}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", "db"}}}}},
                  {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}}}}}};
  ASSERT_TRUE(client->Create(kStatefulSet, "default", sts).ok());
  StatusOr<Json> scaled =
      client->Patch(kStatefulSet, "default", "db", {{"spec", {{"replicas", 3}}}}, "scale");
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  EXPECT_EQ(scaled.value()["kind"], "Scale");
  EXPECT_EQ(client->Get(kStatefulSet, "default", "db").value()["spec"]["replicas"], 3);
}

TEST(ClientKubeSim, ListPaginatesAndListAllFollowsContinue) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  for (int i = 0; i < 7; ++i) {
    Json labels = {{"app", i % 2 == 0 ? "even" : "odd"}};
    ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap("cm-" + std::to_string(i), {}, labels)).ok());
  }
  ListOptions page;
  page.limit = 3;
  StatusOr<Json> first = client->List(kConfigMap, "default", page);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first.value()["items"].size(), 3u);
  EXPECT_FALSE(first.value()["metadata"].value("continue", "").empty());

  StatusOr<Json> all = client->ListAll(kConfigMap, "default", page);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all.value()["items"].size(), 7u);
  EXPECT_FALSE(all.value()["metadata"].contains("continue"));
  EXPECT_FALSE(all.value()["metadata"].value("resourceVersion", "").empty());
  EXPECT_EQ(client->Counts().by_verb.at("list"), 4u);  // 1 + ceil(7 / 3)

  ListOptions selected;
  selected.label_selector = "app in (even)";
  StatusOr<Json> even = client->ListAll(kConfigMap, "default", selected);
  ASSERT_TRUE(even.ok()) << even.status().ToString();
  EXPECT_EQ(even.value()["items"].size(), 4u);
  selected.label_selector = "app=odd";
  selected.field_selector = "metadata.name=cm-3";
  EXPECT_EQ(client->List(kConfigMap, "default", selected).value()["items"].size(), 1u);

  ListOptions bad;
  bad.label_selector = "app in (";
  EXPECT_EQ(client->List(kConfigMap, "default", bad).status().code(), StatusCode::kInvalidArgument);
  // All namespaces.
  StatusOr<Json> everywhere = client->List(kConfigMap, "");
  ASSERT_TRUE(everywhere.ok()) << everywhere.status().ToString();
  EXPECT_GE(everywhere.value()["items"].size(), 7u);
}

TEST(ClientKubeSim, WriteFenceRefusesWritesLocally) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  std::atomic<bool> leader{true};
  client->SetWriteFence([&]() -> Status {
    return leader.load() ? Status::Ok() : Status::Unavailable("lease lost to other-pod");
  });
  ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap("a")).ok());
  leader = false;
  const uint64_t sent_before = client->Counts().Total();
  Status s = client->Create(kConfigMap, "default", ConfigMap("b")).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "write fenced: lease lost to other-pod");
  Json cm = client->Get(kConfigMap, "default", "a").value();  // reads still work
  EXPECT_EQ(client->Update(kConfigMap, "default", cm).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->UpdateStatus(kConfigMap, "default", cm).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->Patch(kConfigMap, "default", "a", {{"data", {{"k", "v"}}}}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->Delete(kConfigMap, "default", "a").code(), StatusCode::kFailedPrecondition);
  const RequestCounts counts = client->Counts();
  EXPECT_EQ(counts.fenced, 5u);
  EXPECT_EQ(counts.Total(), sent_before + 1);  // only the Get went out
  EXPECT_EQ(client->Get(kConfigMap, "default", "b").status().code(), StatusCode::kNotFound);
  client->SetWriteFence(nullptr);
  EXPECT_TRUE(client->Delete(kConfigMap, "default", "a").ok());
}

TEST(ClientKubeSim, BearerTokenRequiredAndRefreshedFromFileAfter401) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.token = "new-token"});
  KubeConfig config = sim->config();
  ASSERT_EQ(config.token, "new-token");
  EXPECT_TRUE(Connect(config)->Get(kNamespace, "", "default").ok());

  config.token.clear();
  EXPECT_EQ(Connect(config)->Get(kNamespace, "", "default").status().code(), StatusCode::kUnauthenticated);

  config.token_file = sim->dir() + "/sa-token";
  std::ofstream(config.token_file) << "old-token\n";
  FakeClock clock;
  ClientOptions options;
  options.clock = &clock;  // the periodic re-read never fires: only a 401 triggers one
  auto client = Connect(config, options);
  EXPECT_EQ(client->Get(kNamespace, "", "default").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(client->Counts().by_verb.at("get"), 1u);                   // same token after re-read: no retry
  std::ofstream(config.token_file, std::ios::trunc) << "new-token\n";  // the kubelet rotated it
  StatusOr<Json> ns = client->Get(kNamespace, "", "default");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ(client->Counts().by_verb.at("get"), 3u);  // 401 with the old token, then the retry
}

// The retry after a 401 is a second send: the fence is checked again, so a leader that lost its
// Lease in between writes nothing.
TEST(ClientKubeSim, WriteFenceIsCheckedAgainBeforeTheRetryAfter401) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.token = "new-token"});
  KubeConfig config = sim->config();
  config.token.clear();
  config.token_file = sim->dir() + "/sa-token-fence";
  std::ofstream(config.token_file) << "old-token\n";
  FakeClock clock;
  ClientOptions options;
  options.clock = &clock;
  auto client = Connect(config, options);
  int fence_calls = 0;
  client->SetWriteFence([&]() -> Status {
    return fence_calls++ == 0 ? Status::Ok() : Status::Unavailable("lease lost to other-pod");
  });
  // The client holds the old token (its first request is refused), then the kubelet rotates it:
  // the next send gets a 401 and is retried with the new one.
  EXPECT_EQ(client->Get(kNamespace, "", "default").status().code(), StatusCode::kUnauthenticated);
  std::ofstream(config.token_file, std::ios::trunc) << "new-token\n";
  Status s = client->Create(kConfigMap, "default", ConfigMap("fenced-retry")).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(fence_calls, 2);
  const RequestCounts counts = client->Counts();
  EXPECT_EQ(counts.by_verb.at("create"), 1u);  // the 401'd send only; the retry was fenced
  EXPECT_EQ(counts.fenced, 1u);
  client->SetWriteFence(nullptr);
  EXPECT_EQ(client->Get(kConfigMap, "default", "fenced-retry").status().code(), StatusCode::kNotFound);
}

TEST(ClientKubeSim, SlowServerHitsThePerRequestTimeout) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.faults_json = R"({"latency_ms": [3000, 3000]})"});
  auto client = Connect(sim->config());
  CallOptions call;
  call.timeout_ms = 200;
  Status s = client->Get(kNamespace, "", "default", call).status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("GET /api/v1/namespaces/default"), std::string::npos) << s.ToString();
}

TEST(ClientKubeSim, ServerGoneIsUnavailable) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  ASSERT_TRUE(client->Get(kNamespace, "", "default").ok());
  sim->Kill();
  EXPECT_EQ(client->Get(kNamespace, "", "default").status().code(), StatusCode::kUnavailable);
}

TEST(ClientKubeSim, ConcurrentWritersAndReaders) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  ClientOptions options;
  options.max_idle_connections = 4;
  auto client = Connect(sim->config(), options);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 15;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!client->Create(kConfigMap, "default", ConfigMap(name, {{"i", std::to_string(i)}})).ok())
          ++failures;
        StatusOr<Json> got = client->Get(kConfigMap, "default", name);
        if (!got.ok() || got.value()["data"]["i"] != std::to_string(i)) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client->ListAll(kConfigMap, "default").value()["items"].size(),
            static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace tandem::controller::kube
