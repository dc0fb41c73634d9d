// The limits that protect the server from bad clients: body and header sizes, malformed requests,
// slow-loris heads, idle keep-alive connections and the connection cap.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <poll.h>

#include "agent/http/http_server.h"
#include "agent/http/test_client.h"

namespace tandem::agent::http {
namespace {

using testing::BodyOf;
using testing::Notification;
using testing::RawClient;
using testing::StatusOf;

struct Served {
  std::atomic<int> count{0};
  Handler handler() {
    return [this](const HttpRequest& request, ResponseWriter& writer) {
      ++count;
      writer.Send(200, "text/plain", "ok");
    };
  }
};

std::unique_ptr<HttpServer> StartOrDie(Handler handler, HttpServerOptions options) {
  options.host = "127.0.0.1";
  options.port = 0;
  StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

TEST(HttpLimitsTest, OversizedContentLengthGets413Json) {
  Served served;
  HttpServerOptions options;
  options.max_body_bytes = 10;
  auto server = StartOrDie(served.handler(), options);
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 413);
  EXPECT_NE(client.received().find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(client.received().find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(BodyOf(client.received()),
            "{\"error\":{\"message\":\"request body is 100 bytes, over the limit of 10\","
            "\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
  EXPECT_EQ(served.count, 0);
}

TEST(HttpLimitsTest, ChunkedBodyOverTheLimitGets413) {
  Served served;
  HttpServerOptions options;
  options.max_body_bytes = 4;
  auto server = StartOrDie(served.handler(), options);
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 413);
  EXPECT_EQ(served.count, 0);
}

TEST(HttpLimitsTest, MalformedRequestGets400) {
  Served served;
  auto server = StartOrDie(served.handler(), {});
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("THIS IS NOT HTTP\r\n\r\n"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 400);
  std::string body = BodyOf(client.received());
  EXPECT_EQ(body.rfind("{\"error\":{\"message\":\"malformed HTTP request", 0), 0u) << body;
  EXPECT_NE(body.find("\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}"),
            std::string::npos);
  EXPECT_EQ(served.count, 0);
}

TEST(HttpLimitsTest, HeaderOverTheLimitGets431) {
  Served served;
  HttpServerOptions options;
  options.max_header_bytes = 256;
  auto server = StartOrDie(served.handler(), options);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1000, 'a') + "\r\n\r\n"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 431);
  EXPECT_EQ(served.count, 0);
}

TEST(HttpLimitsTest, SlowLorisIsCutOffAtTheHeaderTimeout) {
  Served served;
  HttpServerOptions options;
  options.header_timeout_ms = 300;
  auto server = StartOrDie(served.handler(), options);
  RawClient client(server->port());
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  // One byte every 50 ms: each byte is progress, but the head as a whole is late.
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500)) {
    if (!client.Send("a")) {
      closed = true;
      break;
    }
    client.ReadSome(50);
    closed = client.eof();
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(closed) << "still open after 1.5 s";
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_EQ(client.received(), "");  // closed without an answer
  EXPECT_EQ(served.count, 0);
}

TEST(HttpLimitsTest, IdleKeepAliveConnectionIsClosed) {
  Served served;
  HttpServerOptions options;
  options.idle_timeout_ms = 200;
  auto server = StartOrDie(served.handler(), options);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string response;
  ASSERT_TRUE(client.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_TRUE(client.ReadToEof(2000));
  EXPECT_EQ(client.received(), "");
}

TEST(HttpLimitsTest, ConnectionCloseIsHonoured) {
  Served served;
  auto server = StartOrDie(served.handler(), {});
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(client.ReadToEof());
  EXPECT_EQ(StatusOf(client.received()), 200);
  EXPECT_NE(client.received().find("Connection: close\r\n"), std::string::npos);
}

TEST(HttpLimitsTest, OverMaxConnectionsGets503) {
  Notification entered;
  Notification release;
  HttpServerOptions options;
  options.max_connections = 1;
  auto server = StartOrDie(
      [&](const HttpRequest& request, ResponseWriter& writer) {
        entered.Notify();
        release.WaitFor();
        writer.Send(200, "text/plain", "ok");
      },
      options);
  RawClient first(server->port());
  ASSERT_TRUE(first.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(entered.WaitFor());
  EXPECT_EQ(server->open_connections(), 1u);

  RawClient second(server->port());
  ASSERT_TRUE(second.connected());
  second.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(second.ReadToEof());
  EXPECT_EQ(StatusOf(second.received()), 503);
  EXPECT_NE(BodyOf(second.received()).find("\"type\":\"server_error\""), std::string::npos);

  release.Notify();
  std::string response;
  ASSERT_TRUE(first.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
}

}  // namespace
}  // namespace tandem::agent::http
