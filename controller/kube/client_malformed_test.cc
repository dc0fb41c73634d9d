// The REST client against a scripted server that answers what kube-sim never would: malformed
// watch lines and ERROR events, odd JSON types, non-JSON bodies. Nothing may throw or crash.
#include <mutex>

#include <gtest/gtest.h>

#include "controller/kube/client.h"
#include "controller/kube/testing/tiny_http_server.h"

namespace tandem::controller::kube {
namespace {

using testing::TinyConnection;
using testing::TinyHttpServer;
using testing::TinyRequest;

std::unique_ptr<Client> Connect(int port) {
  KubeConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(port);
  StatusOr<std::unique_ptr<Client>> client = Client::New(config);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

// Serves one watch stream made of `lines`.
TinyHttpServer::Handler WatchOf(std::vector<std::string> lines) {
  return [lines](const TinyRequest&, TinyConnection& c) {
    c.StartChunked(200);
    for (const std::string& line : lines) c.WriteChunk(line + "\n");
    c.EndChunks();
  };
}

Status WatchAll(Client& client, int* events) {
  return client.Watch(kPod, "default", {}, [events](const WatchEvent&) {
    ++*events;
    return true;
  });
}

TEST(ClientMalformed, WatchLineThatIsNotAnEvent) {
  TinyHttpServer server(WatchOf({R"({"type":"ADDED","object":{}})", "not json", R"({"type":"ADDED"})"}));
  int events = 0;
  Status s = WatchAll(*Connect(server.port()), &events);
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("malformed watch event: not json"), std::string::npos) << s.ToString();
  EXPECT_EQ(events, 1);
}

TEST(ClientMalformed, WatchErrorEvents) {
  struct Case {
    std::string line;
    StatusCode want;
  };
  const Case cases[] = {
      {R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})",
       StatusCode::kOutOfRange},
      {R"({"type":"ERROR","object":{"kind":"Status","code":"410"}})", StatusCode::kUnavailable},
      {R"({"type":"ERROR","object":"text"})", StatusCode::kUnavailable},
      {R"({"type":"ERROR"})", StatusCode::kUnavailable},
      {R"({"type":"ERROR","object":{"kind":"Status","code":403,"message":7}})",
       StatusCode::kPermissionDenied},
      {R"({"type":5,"object":{}})", StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    TinyHttpServer server(WatchOf({c.line}));
    int events = 0;
    Status s = WatchAll(*Connect(server.port()), &events);
    EXPECT_EQ(s.code(), c.want) << c.line << " -> " << s.ToString();
    EXPECT_EQ(events, 0);
  }
}

TEST(ClientMalformed, OddJsonTypesInResponses) {
  TinyHttpServer server([](const TinyRequest& r, TinyConnection& c) {
    if (r.target.find("limit=") != std::string::npos) {
      c.Respond(200, R"({"kind":"PodList","metadata":{"continue":17,"resourceVersion":"5"},"items":[{}]})");
    } else if (r.target.find("/pods/text") != std::string::npos) {
      c.Respond(200, "plain text");
    } else {
      c.Respond(404, R"({"kind":{"x":1},"message":["a"]})");
    }
  });
  auto client = Connect(server.port());
  ListOptions page;
  page.limit = 1;
  StatusOr<Json> all = client->ListAll(kPod, "default", page);
  ASSERT_TRUE(all.ok()) << all.status().ToString();  // a non-string continue ends the listing
  EXPECT_EQ(all.value()["items"].size(), 1u);
  EXPECT_EQ(client->Get(kPod, "default", "text").status().code(), StatusCode::kInternal);
  EXPECT_EQ(client->Get(kPod, "default", "gone").status().code(), StatusCode::kNotFound);
}

// A response nested deeper than any object needs is refused before nlohmann/json recurses into
// it (a 200 KB body of brackets overflowed the stack when the object was copied).
TEST(ClientMalformed, DeeplyNestedResponseIsAnErrorNotAStackOverflow) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) {
    c.Respond(200, std::string(100000, '[') + std::string(100000, ']'));
  });
  auto client = Connect(server.port());
  StatusOr<Json> got = client->Get(kPod, "default", "deep");
  EXPECT_EQ(got.status().code(), StatusCode::kInternal);
  EXPECT_NE(got.status().message().find("nests deeper than 1000 levels"), std::string::npos)
      << got.status().ToString();
}

TEST(ClientMalformed, RequestsCarryUserAgentAndSurviveInvalidUtf8) {
  std::mutex mu;
  std::vector<TinyRequest> seen;
  TinyHttpServer server([&](const TinyRequest& r, TinyConnection& c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(r);
    }
    c.Respond(201, "{}");
  });
  auto client = Connect(server.port());
  Json pod = {{"metadata", {{"name", "p"}, {"annotations", {{"bad", std::string("\xff\xfe")}}}}}};
  ASSERT_TRUE(client->Create(kPod, "default", pod).ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].headers["user-agent"].rfind("tandem-controller/", 0), 0u)
      << seen[0].headers["user-agent"];
  EXPECT_EQ(seen[0].headers["content-type"], "application/json");
  const Json sent = Json::parse(seen[0].body);
  EXPECT_EQ(sent["kind"], "Pod");
  EXPECT_EQ(sent["apiVersion"], "v1");
  EXPECT_EQ(sent["metadata"]["annotations"]["bad"], "\xEF\xBF\xBD\xEF\xBF\xBD");  // U+FFFD twice
}

}  // namespace
}  // namespace tandem::controller::kube
