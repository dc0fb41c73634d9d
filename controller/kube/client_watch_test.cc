// Client::Watch against kube-sim: events in order from a list's resourceVersion, bookmarks, 410
// (history expired and injected), dropped streams, and cancelling from another thread.
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "controller/kube/client.h"
#include "controller/kube/testing/kube_sim_process.h"

namespace tandem::controller::kube {
namespace {

std::unique_ptr<Client> Connect(const KubeConfig& config) {
  StatusOr<std::unique_ptr<Client>> client = Client::New(config);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

Json ConfigMap(const std::string& name) { return {{"metadata", {{"name", name}}}, {"data", {{"k", "v"}}}}; }

std::string ListVersion(Client& client) {
  StatusOr<Json> list = client.List(kConfigMap, "default");
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  return list.value()["metadata"]["resourceVersion"];
}

TEST(ClientWatch, DeliversAddModifyDeleteFromTheListVersion) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap("before")).ok());
  WatchOptions options;
  options.resource_version = ListVersion(*client);
  options.allow_bookmarks = false;

  std::promise<void> watching;
  std::thread writer([&] {
    // Writes happen after the watch is open; with a resourceVersion none would be lost anyway.
    watching.get_future().wait();
    auto writer_client = Connect(sim->config());
    Json cm = writer_client->Create(kConfigMap, "default", ConfigMap("w")).value();
    cm["data"]["k"] = "v2";
    EXPECT_TRUE(writer_client->Update(kConfigMap, "default", cm).ok());
    EXPECT_TRUE(writer_client->Delete(kConfigMap, "default", "w").ok());
  });
  watching.set_value();
  std::vector<std::string> seen;
  Status s = client->Watch(kConfigMap, "default", options, [&](const WatchEvent& e) {
    seen.push_back(e.type + " " + e.object["metadata"]["name"].get<std::string>());
    return e.type != "DELETED";
  });
  writer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED w", "MODIFIED w", "DELETED w"}));
  EXPECT_EQ(client->Counts().by_verb.at("watch"), 1u);
}

TEST(ClientWatch, WithoutAVersionStartsWithSyntheticAdds) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  for (const char* name : {"a", "b"})
    ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap(name)).ok());
  int added = 0;
  ASSERT_TRUE(client
                  ->Watch(kConfigMap, "default", {},
                          [&](const WatchEvent& e) {
                            added += e.type == "ADDED";
                            return added < 2;
                          })
                  .ok());
  EXPECT_EQ(added, 2);
}

TEST(ClientWatch, BookmarksCarryAResourceVersion) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.extra_args = {"--bookmark-interval", "0.05"}});
  auto client = Connect(sim->config());
  WatchOptions options;
  options.resource_version = ListVersion(*client);
  std::string bookmark_version;
  Status s = client->Watch(kConfigMap, "default", options, [&](const WatchEvent& e) {
    if (e.type != "BOOKMARK") return true;
    bookmark_version = e.object["metadata"]["resourceVersion"];
    return false;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(bookmark_version.empty());
}

TEST(ClientWatch, ExpiredVersionIsOutOfRange) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.extra_args = {"--history", "3"}});
  auto client = Connect(sim->config());
  const std::string old_version = ListVersion(*client);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap("c" + std::to_string(i))).ok());
  WatchOptions options;
  options.resource_version = old_version;
  int events = 0;
  Status s = client->Watch(kConfigMap, "default", options, [&](const WatchEvent&) { return ++events > 0; });
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_EQ(events, 0);
}

TEST(ClientWatch, InjectedGoneAfterKEventsIsOutOfRange) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.faults_json = R"({"gone_every_events": 2})"});
  auto client = Connect(sim->config());
  for (const char* name : {"a", "b", "c"})
    ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap(name)).ok());
  int events = 0;
  Status s = client->Watch(kConfigMap, "default", {}, [&](const WatchEvent&) { return ++events > 0; });
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_EQ(events, 2);
}

TEST(ClientWatch, DroppedStreamIsUnavailable) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.faults_json = R"({"drop_watch_percent": 100})"});
  auto client = Connect(sim->config());
  ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap("a")).ok());
  int events = 0;
  Status s = client->Watch(kConfigMap, "default", {}, [&](const WatchEvent&) { return ++events > 0; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(events, 1);
}

TEST(ClientWatch, ServerSideTimeoutEndsTheWatchCleanly) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  WatchOptions options;
  options.resource_version = ListVersion(*client);
  options.timeout_seconds = 1;
  options.allow_bookmarks = false;
  EXPECT_TRUE(client->Watch(kConfigMap, "default", options, [](const WatchEvent&) { return true; }).ok());
}

TEST(ClientWatch, CancelFromAnotherThread) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  ASSERT_TRUE(client->Create(kConfigMap, "default", ConfigMap("a")).ok());
  CancelToken cancel;
  std::promise<void> first;
  std::thread stopper([&] {
    first.get_future().wait();
    cancel.Cancel();
  });
  bool signalled = false;
  Status s = client->Watch(
      kConfigMap, "default", {},
      [&](const WatchEvent&) {
        if (!signalled) first.set_value();
        signalled = true;
        return true;
      },
      &cancel);
  stopper.join();
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
}

TEST(ClientWatch, HttpErrorsAreMapped) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});
  auto client = Connect(sim->config());
  WatchOptions options;
  options.label_selector = "app in (";
  EXPECT_EQ(client->Watch(kConfigMap, "default", options, [](const WatchEvent&) { return true; }).code(),
            StatusCode::kInvalidArgument);
  const ResourceRef unknown{"example.com", "v1", "widgets", "Widget", true};
  EXPECT_EQ(client->Watch(unknown, "default", {}, [](const WatchEvent&) { return true; }).code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::controller::kube
