// Informer against kube-sim: the cache must equal the server's objects after random changes,
// with watches cut and 410 Gone injected (kube-sim --faults), and the event handlers must have
// told the same story as the cache.

#include "controller/runtime/informer.h"

#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "controller/kube/client.h"
#include "controller/kube/testing/kube_sim_process.h"

namespace tandem::controller::runtime {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

template <typename F>
bool Eventually(F done, int seconds = 30) {
  for (int i = 0; i < seconds * 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return done();
}

std::string Rv(const Json& obj) { return obj["metadata"].value("resourceVersion", ""); }

// Key -> resourceVersion, as the handlers saw it (thread-safe).
class Mirror {
 public:
  EventHandlers Handlers() {
    EventHandlers h;
    h.on_add = [this](const ObjectPtr& o) {
      std::lock_guard<std::mutex> lock(mu_);
      if (objects_.count(ObjectKey(*o))) ++double_adds_;
      objects_[ObjectKey(*o)] = Rv(*o);
      ++adds_;
    };
    h.on_update = [this](const ObjectPtr& old_obj, const ObjectPtr& new_obj) {
      std::lock_guard<std::mutex> lock(mu_);
      if (objects_[ObjectKey(*old_obj)] != Rv(*old_obj)) ++stale_old_;
      objects_[ObjectKey(*new_obj)] = Rv(*new_obj);
      ++updates_;
    };
    h.on_delete = [this](const ObjectPtr& o) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!objects_.erase(ObjectKey(*o))) ++unknown_deletes_;
      ++deletes_;
    };
    return h;
  }
  std::map<std::string, std::string> Objects() {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_;
  }

  std::mutex mu_;
  std::map<std::string, std::string> objects_;
  int adds_ = 0, updates_ = 0, deletes_ = 0;
  int double_adds_ = 0, stale_old_ = 0, unknown_deletes_ = 0;
};

class InformerTest : public ::testing::Test {
 protected:
  void StartSim(const std::string& faults) {
    kube::testing::KubeSimOptions options;
    options.faults_json = faults;
    auto sim = kube::testing::KubeSimProcess::Start(options);
    if (!sim.ok() && sim.status().code() == StatusCode::kUnavailable) GTEST_SKIP() << sim.status().ToString();
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(sim).value();
    client_ = kube::Client::New(sim_->config()).value();
    writer_ = kube::Client::New(sim_->config()).value();
    for (const char* ns : {"ns-a", "ns-b"}) {
      Json obj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
      auto created = writer_->Create(kube::kNamespace, "", obj);
      ASSERT_TRUE(created.ok() || created.status().code() == StatusCode::kAlreadyExists)
          << created.status().ToString();
    }
    // A real owner (kube-sim garbage-collects objects whose owners do not exist).
    Json owner = ConfigMap("ns-a", "owner");
    owner["metadata"]["labels"]["test"] = "owner";
    auto created = writer_->Create(kube::kConfigMap, "ns-a", owner);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    owner_uid_ = (*created)["metadata"]["uid"];
  }
  InformerOptions Options() {
    InformerOptions o;
    o.resource = kube::kConfigMap;
    o.label_selector = "test=informer";
    o.page_size = 7;
    o.initial_backoff = milliseconds(5);
    o.max_backoff = milliseconds(200);
    return o;
  }
  static Json ConfigMap(const std::string& ns, const std::string& name, const std::string& owner_uid = "") {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"test", "informer"}}}}},
               {"data", {{"v", "0"}}}};
    if (!owner_uid.empty()) {
      cm["metadata"]["ownerReferences"] =
          Json::array({{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "owner"}, {"uid", owner_uid}}});
    }
    return cm;
  }
  // The server's labelled ConfigMaps as key -> resourceVersion.
  std::map<std::string, std::string> ServerObjects() {
    kube::ListOptions list;
    list.label_selector = "test=informer";
    auto got = writer_->ListAll(kube::kConfigMap, "", list);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    std::map<std::string, std::string> out;
    if (got.ok()) {
      for (const Json& item : (*got)["items"]) out[ObjectKey(item)] = Rv(item);
    }
    return out;
  }
  static std::map<std::string, std::string> CacheObjects(const Informer& informer) {
    std::map<std::string, std::string> out;
    for (const ObjectPtr& o : informer.List()) out[ObjectKey(*o)] = Rv(*o);
    return out;
  }

  std::unique_ptr<kube::testing::KubeSimProcess> sim_;
  std::unique_ptr<kube::Client> client_, writer_;
  std::string owner_uid_;  // of ns-a/owner
};

TEST(ObjectKeyTest, NamespacedAndClusterScoped) {
  EXPECT_EQ(ObjectKey(Json{{"metadata", {{"name", "a"}, {"namespace", "ns"}}}}), "ns/a");
  EXPECT_EQ(ObjectKey(Json{{"metadata", {{"name", "node-1"}}}}), "node-1");
  EXPECT_EQ(ObjectKey(Json{{"metadata", {{"namespace", "ns"}}}}), "");
  EXPECT_EQ(ObjectKey(Json::array()), "");
  EXPECT_EQ(ObjectKey(Json{{"metadata", 7}}), "");
  std::string ns, name;
  SplitObjectKey("ns/a", &ns, &name);
  EXPECT_EQ(ns, "ns");
  EXPECT_EQ(name, "a");
  SplitObjectKey("node-1", &ns, &name);
  EXPECT_EQ(ns, "");
  EXPECT_EQ(name, "node-1");
}

TEST_F(InformerTest, ListsPagesThenWatchesAddsUpdatesDeletes) {
  StartSim("");
  if (IsSkipped()) return;
  for (int i = 0; i < 20; ++i) {
    std::string ns = i % 2 ? "ns-a" : "ns-b";
    ASSERT_TRUE(writer_
                    ->Create(kube::kConfigMap, ns,
                             ConfigMap(ns, "cm-" + std::to_string(i), i % 2 && i < 10 ? owner_uid_ : ""))
                    .ok());
  }
  Json unlabelled = ConfigMap("ns-a", "other");
  unlabelled["metadata"]["labels"]["test"] = "else";
  ASSERT_TRUE(writer_->Create(kube::kConfigMap, "ns-a", unlabelled).ok());

  Informer informer(client_.get(), Options());
  Mirror mirror;
  informer.AddEventHandlers(mirror.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(CacheObjects(informer), ServerObjects());
  EXPECT_EQ(informer.List().size(), 20u);  // the unlabelled one is filtered out
  EXPECT_EQ(mirror.adds_, 20);
  EXPECT_EQ(informer.ListByOwner(owner_uid_).size(), 5u);
  EXPECT_EQ(informer.ListNamespace("ns-a").size(), 10u);
  ObjectPtr got = informer.Get("ns-b", "cm-0");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ((*got)["kind"], "ConfigMap");
  EXPECT_EQ(informer.Get("ns-b", "missing"), nullptr);

  ASSERT_TRUE(writer_->Patch(kube::kConfigMap, "ns-b", "cm-0", Json{{"data", {{"v", "1"}}}}).ok());
  ASSERT_TRUE(writer_->Delete(kube::kConfigMap, "ns-a", "cm-1").ok());
  ASSERT_TRUE(writer_->Create(kube::kConfigMap, "ns-a", ConfigMap("ns-a", "late", owner_uid_)).ok());
  ASSERT_TRUE(Eventually([&] { return CacheObjects(informer) == ServerObjects(); }));
  EXPECT_EQ((*informer.Get("ns-b", "cm-0"))["data"]["v"], "1");
  EXPECT_EQ(informer.Get("ns-a", "cm-1"), nullptr);
  EXPECT_EQ(informer.ListByOwner(owner_uid_).size(), 5u);  // cm-1 left, late joined
  ASSERT_TRUE(Eventually([&] { return mirror.Objects() == CacheObjects(informer); }));
  EXPECT_EQ(mirror.updates_, 1);
  EXPECT_EQ(mirror.deletes_, 1);
  EXPECT_EQ(mirror.adds_, 21);
  InformerStats stats = informer.Stats();
  EXPECT_EQ(stats.lists, 1);
  EXPECT_EQ(stats.relists, 0);
  informer.Stop();
}

// Random creates, updates and deletes while kube-sim cuts watches and ends streams with 410
// Gone: the informer resumes and relists, and in the end its cache, and the handlers' view,
// equal the server's objects.
TEST_F(InformerTest, CacheEqualsServerAfterRandomChangesWithFaults) {
  StartSim(R"({"gone_every_events": 40, "drop_watch_percent": 3, "seed": 11})");
  if (IsSkipped()) return;
  Informer informer(client_.get(), Options());
  Mirror mirror;
  informer.AddEventHandlers(mirror.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));

  std::mt19937 rng(5);
  std::map<std::string, bool> exists;
  int writes = 0;
  for (int i = 0; i < 600; ++i) {
    std::string ns = rng() % 2 ? "ns-a" : "ns-b";
    std::string name = "cm-" + std::to_string(rng() % 40);
    std::string key = ns + "/" + name;
    Status s;
    if (!exists[key]) {
      s = writer_
              ->Create(kube::kConfigMap, ns,
                       ConfigMap(ns, name, ns == "ns-a" && rng() % 3 == 0 ? owner_uid_ : ""))
              .status();
      exists[key] = s.ok();
    } else if (rng() % 3) {
      s = writer_->Patch(kube::kConfigMap, ns, name, Json{{"data", {{"v", std::to_string(i)}}}}).status();
    } else {
      s = writer_->Delete(kube::kConfigMap, ns, name);
      exists[key] = !s.ok();
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    ++writes;
  }
  ASSERT_TRUE(Eventually([&] { return CacheObjects(informer) == ServerObjects(); }))
      << "cache " << CacheObjects(informer).size() << " objects, server " << ServerObjects().size();
  ASSERT_TRUE(Eventually([&] { return mirror.Objects() == CacheObjects(informer); }));
  EXPECT_EQ(mirror.double_adds_, 0);
  EXPECT_EQ(mirror.stale_old_, 0);
  EXPECT_EQ(mirror.unknown_deletes_, 0);
  size_t owned = 0;
  for (const ObjectPtr& o : informer.List()) owned += o->at("metadata").contains("ownerReferences");
  EXPECT_EQ(informer.ListByOwner(owner_uid_).size(), owned);
  InformerStats stats = informer.Stats();
  EXPECT_GE(stats.relists, 1) << "410 every 40 events should force relists";
  EXPECT_GE(stats.resumes, 1) << "dropped watches should be resumed";
  std::printf("%d writes: %lld lists (%lld relists), %lld watch resumes, %lld events, %lld errors\n", writes,
              static_cast<long long>(stats.lists), static_cast<long long>(stats.relists),
              static_cast<long long>(stats.resumes), static_cast<long long>(stats.watch_events),
              static_cast<long long>(stats.errors));
  informer.Stop();
}

// Dropped watch streams (no 410) are resumed from the last resourceVersion seen, never relisted,
// and no change is lost or delivered twice.
TEST_F(InformerTest, DroppedWatchesResumeWithoutRelisting) {
  StartSim(R"({"drop_watch_percent": 30, "seed": 3})");
  if (IsSkipped()) return;
  Informer informer(client_.get(), Options());
  Mirror mirror;
  informer.AddEventHandlers(mirror.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  for (int i = 0; i < 60; ++i) {
    std::string name = "cm-" + std::to_string(i % 20);
    if (i < 20) {
      ASSERT_TRUE(writer_->Create(kube::kConfigMap, "ns-b", ConfigMap("ns-b", name)).ok());
    } else {
      ASSERT_TRUE(
          writer_->Patch(kube::kConfigMap, "ns-b", name, Json{{"data", {{"v", std::to_string(i)}}}}).ok());
    }
  }
  ASSERT_TRUE(Eventually([&] { return CacheObjects(informer) == ServerObjects(); }));
  ASSERT_TRUE(Eventually([&] { return mirror.Objects() == CacheObjects(informer); }));
  EXPECT_EQ(mirror.adds_, 20);
  EXPECT_EQ(mirror.updates_, 40);
  InformerStats stats = informer.Stats();
  EXPECT_EQ(stats.relists, 0);
  EXPECT_GE(stats.resumes, 3);
  informer.Stop();
}

// With 410 after every single event the informer relists after each one; changes made meanwhile
// arrive through the relist diff (adds, updates and deletes it computed against the cache).
TEST_F(InformerTest, RelistDiffDeliversWhatChangedWhileAway) {
  StartSim(R"({"gone_every_events": 1})");
  if (IsSkipped()) return;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(writer_->Create(kube::kConfigMap, "ns-a", ConfigMap("ns-a", "cm-" + std::to_string(i))).ok());
  }
  Informer informer(client_.get(), Options());
  Mirror mirror;
  informer.AddEventHandlers(mirror.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(writer_->Delete(kube::kConfigMap, "ns-a", "cm-" + std::to_string(i)).ok());
    ASSERT_TRUE(
        writer_->Patch(kube::kConfigMap, "ns-a", "cm-" + std::to_string(i + 3), Json{{"data", {{"v", "x"}}}})
            .ok());
    ASSERT_TRUE(
        writer_->Create(kube::kConfigMap, "ns-a", ConfigMap("ns-a", "new-" + std::to_string(i))).ok());
  }
  ASSERT_TRUE(Eventually([&] { return CacheObjects(informer) == ServerObjects(); }));
  ASSERT_TRUE(Eventually([&] { return mirror.Objects() == CacheObjects(informer); }));
  EXPECT_EQ(mirror.adds_, 13);
  EXPECT_EQ(mirror.updates_, 3);
  EXPECT_EQ(mirror.deletes_, 3);
  EXPECT_GE(informer.Stats().relists, 1);
  informer.Stop();
}

TEST_F(InformerTest, StopEndsABlockedWatchAndAnUnreachableServerBacksOff) {
  StartSim("");
  if (IsSkipped()) return;
  Informer informer(client_.get(), Options());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  informer.Stop();  // returns: the watch was cancelled
  EXPECT_TRUE(informer.HasSynced());

  sim_->Kill();
  Informer orphan(client_.get(), Options());
  orphan.Start();
  ASSERT_TRUE(Eventually([&] { return orphan.Stats().errors >= 3; }));
  EXPECT_FALSE(orphan.HasSynced());
  EXPECT_FALSE(orphan.WaitForSync(milliseconds(1)));
  EXPECT_EQ(orphan.Stats().last_error.code(), StatusCode::kUnavailable);
  orphan.Stop();
}

}  // namespace
}  // namespace tandem::controller::runtime
