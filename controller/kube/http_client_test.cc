// HttpClient against TinyHttpServer: keep-alive reuse, stale connections, deadlines, chunked
// bodies, line streaming, cross-thread cancel, dropped streams and concurrent callers.
#include "controller/kube/http_client.h"

#include <atomic>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "controller/kube/testing/tiny_http_server.h"

namespace tandem::controller::kube {
namespace {

using testing::TinyConnection;
using testing::TinyHttpServer;
using testing::TinyRequest;

std::unique_ptr<HttpClient> MakeClient(int port, int64_t timeout_ms = 10'000) {
  HttpClientOptions options;
  options.server = "http://127.0.0.1:" + std::to_string(port);
  options.user_agent = "tandem-controller/test";
  options.request_timeout_ms = timeout_ms;
  StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::New(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

HttpRequest Get(std::string target) {
  HttpRequest r;
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

TEST(HttpClient, SendsHeadersAndBodyAndReadsResponse) {
  TinyRequest seen;
  std::mutex mu;
  TinyHttpServer server([&](const TinyRequest& r, TinyConnection& c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen = r;
    }
    c.Respond(201, R"({"ok":true})");
  });
  auto client = MakeClient(server.port());
  HttpRequest r;
  r.method = "POST";
  r.target = "/api/v1/namespaces/a/pods?limit=2";
  r.body = R"({"x":1})";
  r.content_type = "application/json";
  r.bearer_token = "s3cret";
  StatusOr<HttpResponse> response = client->Do(r);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response.value().status, 201);
  EXPECT_EQ(response.value().body, R"({"ok":true})");
  EXPECT_EQ(response.value().content_type, "application/json");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/api/v1/namespaces/a/pods?limit=2");
  EXPECT_EQ(seen.body, R"({"x":1})");
  EXPECT_EQ(seen.headers["authorization"], "Bearer s3cret");
  EXPECT_EQ(seen.headers["user-agent"], "tandem-controller/test");
  EXPECT_EQ(seen.headers["content-type"], "application/json");
  EXPECT_EQ(seen.headers["host"], "127.0.0.1:" + std::to_string(server.port()));
}

TEST(HttpClient, ReusesKeepAliveConnections) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) { c.Respond(200, "{}"); });
  auto client = MakeClient(server.port());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->Do(Get("/x")).ok());
  EXPECT_EQ(client->connections_opened(), 1u);
  EXPECT_EQ(server.connections_accepted(), 1);
}

TEST(HttpClient, ConnectionCloseIsNotReused) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) {
    c.Respond(200, "{}", "Connection: close\r\n");
    c.Close();
  });
  auto client = MakeClient(server.port());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Do(Get("/x")).ok());
  EXPECT_EQ(client->connections_opened(), 3u);
}

TEST(HttpClient, IdleConnectionClosedByServerIsReplaced) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) { c.Respond(200, "{}"); });
  auto client = MakeClient(server.port());
  ASSERT_TRUE(client->Do(Get("/x")).ok());
  server.DropConnections();
  StatusOr<HttpResponse> again = client->Do(Get("/x"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(client->connections_opened(), 2u);
}

TEST(HttpClient, ChunkedResponseIsAssembled) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) {
    c.StartChunked(200);
    c.WriteChunk(R"({"items":)");
    c.WriteChunk(R"([1,2,3]})");
    c.EndChunks();
  });
  auto client = MakeClient(server.port());
  StatusOr<HttpResponse> r = client->Do(Get("/x"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().body, R"({"items":[1,2,3]})");
  ASSERT_TRUE(client->Do(Get("/x")).ok());
  EXPECT_EQ(client->connections_opened(), 1u);  // chunked end leaves the connection reusable
}

TEST(HttpClient, ABodyOverTheCapIsAnErrorAndIsNotReadWhole) {
  // 256 chunks of 64 KiB: 16 MiB (more than loopback buffers hold) against a 100 KiB cap.
  std::atomic<int> chunks_written{0};
  TinyHttpServer server([&](const TinyRequest& r, TinyConnection& c) {
    if (r.target == "/small") {
      c.Respond(200, std::string(100 << 10, 'x'));
      return;
    }
    c.StartChunked(200);
    const std::string chunk(64 << 10, 'x');
    for (int i = 0; i < 256 && c.WriteChunk(chunk); ++i) ++chunks_written;
    c.EndChunks();
  });
  HttpClientOptions options;
  options.server = "http://127.0.0.1:" + std::to_string(server.port());
  options.max_body_bytes = 100 << 10;
  StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::New(options);
  ASSERT_TRUE(client.ok());
  StatusOr<HttpResponse> r = (*client)->Do(Get("/big"));
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("over 102400 bytes"), std::string::npos) << r.status().ToString();
  // Exactly the cap is fine, and the client is usable afterwards (a fresh connection).
  StatusOr<HttpResponse> small = (*client)->Do(Get("/small"));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->body.size(), 100u << 10);
  EXPECT_EQ((*client)->connections_opened(), 2u);
  EXPECT_LT(chunks_written.load(), 256);  // the server could not send it all: nobody read the rest
}

TEST(HttpClient, ServerThatNeverAnswersHitsTheDeadline) {
  std::unique_ptr<TinyHttpServer> server;
  server =
      std::make_unique<TinyHttpServer>([&](const TinyRequest&, TinyConnection&) { server->WaitForStop(); });
  auto client = MakeClient(server->port(), /*timeout_ms=*/10'000);
  HttpRequest r = Get("/hang");
  r.timeout_ms = 100;
  StatusOr<HttpResponse> response = client->Do(r);
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded) << response.status().ToString();
}

TEST(HttpClient, NothingListeningIsUnavailable) {
  int port;
  {
    TinyHttpServer probe([](const TinyRequest&, TinyConnection&) {});
    port = probe.port();
  }
  auto client = MakeClient(port);
  StatusOr<HttpResponse> response = client->Do(Get("/x"));
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable) << response.status().ToString();
}

TEST(HttpClient, BadServerUrlsAreRejected) {
  for (const char* server :
       {"ftp://x", "http://", "https://host:99999", "http://host/prefix", "http://[::1"}) {
    HttpClientOptions options;
    options.server = server;
    EXPECT_EQ(HttpClient::New(options).status().code(), StatusCode::kInvalidArgument) << server;
  }
}

TEST(HttpClient, StreamDeliversLinesAcrossChunkBoundaries) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) {
    c.StartChunked(200);
    c.WriteChunk("{\"a\":1}\n{\"b\"");
    c.WriteChunk(":2}\n\n{\"c\":3}\r\n{\"d\"");
    c.WriteChunk(":4}");
    c.EndChunks();
  });
  auto client = MakeClient(server.port());
  std::vector<std::string> lines;
  StatusOr<HttpResponse> r = client->Stream(Get("/watch"), [&](std::string_view line) {
    lines.emplace_back(line);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().status, 200);
  EXPECT_EQ(lines, (std::vector<std::string>{R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"d":4})"}));
}

TEST(HttpClient, StreamStopsWhenCallbackReturnsFalse) {
  std::unique_ptr<TinyHttpServer> server;
  server = std::make_unique<TinyHttpServer>([&](const TinyRequest&, TinyConnection& c) {
    c.StartChunked(200);
    c.WriteChunk("1\n2\n3\n");
    server->WaitForStop();
  });
  auto client = MakeClient(server->port());
  int seen = 0;
  StatusOr<HttpResponse> r = client->Stream(Get("/watch"), [&](std::string_view) { return ++seen < 2; });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(seen, 2);
}

TEST(HttpClient, StreamIsCancelledFromAnotherThread) {
  std::unique_ptr<TinyHttpServer> server;
  server = std::make_unique<TinyHttpServer>([&](const TinyRequest&, TinyConnection& c) {
    c.StartChunked(200);
    c.WriteChunk("first\n");
    server->WaitForStop();
  });
  auto client = MakeClient(server->port());
  CancelToken cancel;
  std::promise<void> first_line;
  std::thread canceller([&] {
    first_line.get_future().wait();
    cancel.Cancel();
  });
  HttpRequest r = Get("/watch");
  r.cancel = &cancel;
  bool signalled = false;
  StatusOr<HttpResponse> response = client->Stream(r, [&](std::string_view) {
    if (!signalled) first_line.set_value();
    signalled = true;
    return true;
  });
  canceller.join();
  EXPECT_EQ(response.status().code(), StatusCode::kCancelled) << response.status().ToString();
}

TEST(HttpClient, CancelledBeforeStartReturnsCancelled) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) { c.Respond(200, "{}"); });
  auto client = MakeClient(server.port());
  CancelToken cancel;
  cancel.Cancel();
  HttpRequest r = Get("/x");
  r.cancel = &cancel;
  EXPECT_EQ(client->Do(r).status().code(), StatusCode::kCancelled);
}

TEST(HttpClient, StreamDroppedMidBodyIsUnavailable) {
  TinyHttpServer server([](const TinyRequest&, TinyConnection& c) {
    c.StartChunked(200);
    c.WriteChunk("one\n");
    c.Close();
  });
  auto client = MakeClient(server.port());
  std::vector<std::string> lines;
  StatusOr<HttpResponse> r = client->Stream(Get("/watch"), [&](std::string_view line) {
    lines.emplace_back(line);
    return true;
  });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(lines, std::vector<std::string>{"one"});
}

TEST(HttpClient, StreamErrorStatusReturnsTheBody) {
  TinyHttpServer server(
      [](const TinyRequest&, TinyConnection& c) { c.Respond(410, R"({"kind":"Status"})"); });
  auto client = MakeClient(server.port());
  int lines = 0;
  StatusOr<HttpResponse> r = client->Stream(Get("/watch"), [&](std::string_view) { return ++lines > 0; });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().status, 410);
  EXPECT_EQ(r.value().body, R"({"kind":"Status"})");
  EXPECT_EQ(lines, 0);
}

TEST(HttpClient, ConcurrentCallersShareThePool) {
  TinyHttpServer server([](const TinyRequest& r, TinyConnection& c) { c.Respond(200, r.target); });
  auto client = MakeClient(server.port());
  constexpr int kThreads = 4;
  constexpr int kRequests = 50;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequests; ++i) {
        const std::string target = "/t" + std::to_string(t) + "/" + std::to_string(i);
        StatusOr<HttpResponse> r = client->Do(Get(target));
        if (!r.ok() || r.value().body != target) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(server.requests_served(), kThreads * kRequests);
  EXPECT_LE(client->connections_opened(), static_cast<uint64_t>(kThreads));
}

}  // namespace
}  // namespace tandem::controller::kube
