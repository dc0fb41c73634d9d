#include "agent/http/http_server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/http/test_client.h"

namespace tandem::agent::http {
namespace {

using testing::BodyOf;
using testing::Notification;
using testing::RawClient;
using testing::StatusOf;
using testing::WaitUntil;

std::unique_ptr<HttpServer> StartOrDie(Handler handler, HttpServerOptions options = {}) {
  options.host = "127.0.0.1";
  options.port = 0;
  StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

bool HasChunkEnd(const std::string& bytes) { return bytes.find("0\r\n\r\n") != std::string::npos; }

TEST(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  std::mutex mu;
  std::vector<std::string> peers;
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    {
      std::lock_guard<std::mutex> lock(mu);
      peers.push_back(request.peer);
    }
    writer.Send(200, "text/plain", "hello " + request.path);
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  std::string response;
  ASSERT_TRUE(client.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_NE(response.find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_EQ(BodyOf(response), "hello /a");
  ASSERT_TRUE(client.Send("GET /b?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.ReadResponse(&response));
  EXPECT_EQ(BodyOf(response), "hello /b");
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers[0], peers[1]);
  EXPECT_EQ(peers[0].rfind("127.0.0.1:", 0), 0u) << peers[0];
}

TEST(HttpServerTest, PostBodyAndHeadersAreDelivered) {
  std::mutex mu;
  HttpRequest seen;
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen = request;
    }
    writer.Send(200, "application/json", "{}");
  });
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("POST /v1/chat/completions?stream=1 HTTP/1.1\r\nHost: x\r\nX-Tag: a\r\nx-tag: b\r\n"
                  "Content-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"model\":\"m\"}"));
  std::string response;
  ASSERT_TRUE(client.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/v1/chat/completions?stream=1");
  EXPECT_EQ(seen.path, "/v1/chat/completions");
  EXPECT_EQ(seen.query, "stream=1");
  EXPECT_EQ(seen.Header("x-tag"), "a, b");
  EXPECT_EQ(seen.Header("content-type"), "application/json");
  EXPECT_EQ(seen.Header("absent"), "");
  EXPECT_EQ(seen.body, "{\"model\":\"m\"}");
}

TEST(HttpServerTest, ChunkedRequestBodyIsDecoded) {
  std::mutex mu;
  std::string body;
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    {
      std::lock_guard<std::mutex> lock(mu);
      body = request.body;
    }
    writer.Send(200, "text/plain", "ok");
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  std::string response;
  ASSERT_TRUE(client.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(body, "abcde");
}

TEST(HttpServerTest, HeadResponseHasNoBody) {
  auto server = StartOrDie(
      [](const HttpRequest& request, ResponseWriter& writer) { writer.Send(200, "text/plain", "hello"); });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  // The HEAD answer says Content-Length: 5 but carries nothing; the GET's "hello" follows it.
  ASSERT_TRUE(
      client.ReadUntil([](const std::string& bytes) { return bytes.find("hello") != std::string::npos; }));
  std::string bytes = client.received();
  size_t second = bytes.find("HTTP/1.1", 1);
  ASSERT_NE(second, std::string::npos);
  EXPECT_EQ(BodyOf(bytes.substr(0, second)), "");
  EXPECT_EQ(BodyOf(bytes.substr(second)), "hello");
}

TEST(HttpServerTest, StreamingResponseArrivesAsChunksInOrder) {
  Notification first_seen;
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    ASSERT_TRUE(writer.BeginStream(200, "text/event-stream"));
    ASSERT_TRUE(writer.WriteChunk("data: 1\n\n"));
    // The second piece waits until the client has the first: proof that it was flushed.
    ASSERT_TRUE(first_seen.WaitFor());
    ASSERT_TRUE(writer.WriteChunk("data: 22\n\n"));
    writer.EndStream();
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.ReadUntil(
      [](const std::string& bytes) { return bytes.find("9\r\ndata: 1\n\n\r\n") != std::string::npos; }));
  first_seen.Notify();
  ASSERT_TRUE(client.ReadUntil(HasChunkEnd));
  const std::string& response = client.received();
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_NE(response.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(response.find("Cache-Control: no-cache\r\n"), std::string::npos);
  EXPECT_NE(response.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(response.find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_EQ(BodyOf(response), "9\r\ndata: 1\n\n\r\na\r\ndata: 22\n\n\r\n0\r\n\r\n");
}

TEST(HttpServerTest, ClientGoneAfterTheClientCloses) {
  Notification streaming;
  Notification finished;
  std::atomic<bool> saw_gone{false};
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    writer.BeginStream(200, "text/event-stream");
    EXPECT_FALSE(writer.ClientGone());
    streaming.Notify();
    saw_gone = WaitUntil([&] { return writer.ClientGone(); }, 5000);
    finished.Notify();
  });
  auto client = std::make_unique<RawClient>(server->port());
  ASSERT_TRUE(client->Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(streaming.WaitFor());
  client.reset();
  ASSERT_TRUE(finished.WaitFor(6000));
  EXPECT_TRUE(saw_gone);
  EXPECT_TRUE(WaitUntil([&] { return server->open_connections() == 0; }));
}

TEST(HttpServerTest, PipelinedRequestIsNotMistakenForAGoneClient) {
  std::atomic<int> gone_count{0};
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    if (writer.ClientGone()) ++gone_count;
    writer.Send(200, "text/plain", request.path);
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string first;
  std::string second;
  ASSERT_TRUE(client.ReadResponse(&first));
  ASSERT_TRUE(client.ReadResponse(&second));
  EXPECT_EQ(BodyOf(first), "/one");
  EXPECT_EQ(BodyOf(second), "/two");
  EXPECT_EQ(gone_count, 0);
}

TEST(HttpServerTest, HandlerThatDoesNotAnswerGets500) {
  auto server = StartOrDie([](const HttpRequest& request, ResponseWriter& writer) {});
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 500);
  EXPECT_NE(BodyOf(client.received()).find("\"type\":\"server_error\""), std::string::npos);
}

TEST(HttpServerTest, HandlerThatThrowsGets500) {
  auto server = StartOrDie(
      [](const HttpRequest& request, ResponseWriter& writer) { throw std::runtime_error("handler bug"); });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 500);
  EXPECT_NE(client.received().find("Connection: close\r\n"), std::string::npos);
}

TEST(HttpServerTest, StopWhileStreamingReturnsPromptly) {
  Notification streaming;
  std::atomic<bool> saw_failure{false};
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    writer.BeginStream(200, "text/event-stream");
    streaming.Notify();
    bool stopped =
        WaitUntil([&] { return !writer.WriteChunk("data: x\n\n") || writer.ClientGone(); }, 10'000);
    saw_failure = stopped;
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(streaming.WaitFor());
  auto start = std::chrono::steady_clock::now();
  server->Stop();
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(2));
  EXPECT_TRUE(saw_failure);
  EXPECT_EQ(server->open_connections(), 0u);
  server->Stop();  // idempotent
  EXPECT_TRUE(client.ReadToEof());
}

// What a drain waits for: a request counts from its read until its handler has written the
// response, so stopping the server once the count is 0 cuts no answer short (a drained agent's
// backend stream had ended while its response was still being written, and Stop() cut it).
TEST(HttpServerTest, ActiveRequestsCountUntilTheResponseIsWritten) {
  Notification handling, release;
  auto server = StartOrDie([&](const HttpRequest& request, ResponseWriter& writer) {
    handling.Notify();
    release.WaitFor(10'000);
    writer.Send(200, "text/plain", "late answer");
  });
  EXPECT_EQ(server->active_requests(), 0);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(handling.WaitFor());
  EXPECT_EQ(server->active_requests(), 1);
  release.Notify();
  std::string response;
  ASSERT_TRUE(client.ReadResponse(&response));
  EXPECT_EQ(BodyOf(response), "late answer");
  // The handler has returned once the response is out; the kept-alive connection, idle, is not a
  // request.
  EXPECT_TRUE(WaitUntil([&] { return server->active_requests() == 0; }));
  EXPECT_EQ(server->open_connections(), 1u);
}

TEST(HttpServerTest, StartRejectsABadHost) {
  HttpServerOptions options;
  options.host = "not-an-address";
  StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, [](const HttpRequest&, ResponseWriter&) {});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpServerTest, StartReportsAPortInUse) {
  auto first = StartOrDie([](const HttpRequest&, ResponseWriter&) {});
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = first->port();
  StatusOr<std::unique_ptr<HttpServer>> second =
      HttpServer::Start(options, [](const HttpRequest&, ResponseWriter&) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem::agent::http
