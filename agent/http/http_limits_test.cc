// The limits that protect the server from bad clients: body and header sizes, malformed requests,
// slow-loris heads, idle keep-alive connections, the connection cap and the body budget shared by
// all connections.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

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

// The server's buffered body bytes once they stop changing (a connection gives its bytes back just
// after the client has read its answer), within 2 s.
size_t BufferedOnceSettled(const HttpServer& server) {
  for (int i = 0; i < 200 && server.buffered_body_bytes() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return server.buffered_body_bytes();
}

// Bodies held at once are bounded across connections: one that does not fit is refused 429 with
// Retry-After from its head, before the body is read or "100 Continue" sent; the bytes come back
// when the handler holding them returns.
TEST(HttpLimitsTest, BodyBudgetRefusesWhatDoesNotFitAndTakesItBack) {
  Notification entered;
  Notification release;
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  options.max_buffered_body_bytes = 1500;
  options.body_bytes_free_per_request = 0;
  auto server = StartOrDie(
      [&](const HttpRequest& request, ResponseWriter& writer) {
        if (request.body.size() == 1000) {
          entered.Notify();
          release.WaitFor();
        }
        writer.Send(200, "text/plain", std::to_string(request.body.size()));
      },
      options);
  RawClient holder(server->port());
  ASSERT_TRUE(
      holder.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'a')));
  ASSERT_TRUE(entered.WaitFor());
  EXPECT_GE(server->buffered_body_bytes(), 1000u);
  EXPECT_LE(server->buffered_body_bytes(), 1500u);

  RawClient refused(server->port());
  ASSERT_TRUE(
      refused.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n"));
  ASSERT_TRUE(refused.ReadToEof());
  EXPECT_EQ(StatusOf(refused.received()), 429);
  EXPECT_EQ(refused.received().find("100 Continue"), std::string::npos);
  EXPECT_NE(refused.received().find("Retry-After: 1\r\n"), std::string::npos);
  EXPECT_NE(BodyOf(refused.received()).find("cannot take 1000 more under its limit of 1500"),
            std::string::npos)
      << refused.received();

  RawClient small(server->port());  // what still fits is served meanwhile
  ASSERT_TRUE(
      small.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 400\r\n\r\n" + std::string(400, 'b')));
  std::string response;
  ASSERT_TRUE(small.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_EQ(BodyOf(response), "400");

  release.Notify();
  ASSERT_TRUE(holder.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_EQ(BufferedOnceSettled(*server), 0u);
  RawClient after(server->port());
  ASSERT_TRUE(
      after.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 999\r\n\r\n" + std::string(999, 'c')));
  ASSERT_TRUE(after.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
}

// A chunked body declares no length: it is charged as it grows and refused once it outgrows what
// the budget has left, though it is still under max_body_bytes.
TEST(HttpLimitsTest, ChunkedBodyIsChargedAsItGrows) {
  Notification entered;
  Notification release;
  std::atomic<int> served{0};
  HttpServerOptions options;
  options.max_body_bytes = 32 << 10;
  options.max_buffered_body_bytes = 32 << 10;
  options.body_bytes_free_per_request = 0;
  auto server = StartOrDie(
      [&](const HttpRequest& request, ResponseWriter& writer) {
        ++served;
        entered.Notify();
        release.WaitFor();
        writer.Send(200, "text/plain", "ok");
      },
      options);
  RawClient holder(server->port());
  ASSERT_TRUE(
      holder.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n" + std::string(20000, 'a')));
  ASSERT_TRUE(entered.WaitFor());
  EXPECT_GE(server->buffered_body_bytes(), 20000u);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "1000\r\n" + std::string(4096, 'z') + "\r\n";
  for (int i = 0; i < 6 && client.Send(chunk); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(client.ReadToEof()) << client.received() << " buffered " << server->buffered_body_bytes();
  EXPECT_EQ(StatusOf(client.received()), 429);
  EXPECT_EQ(served, 1);
  release.Notify();
  std::string response;
  ASSERT_TRUE(holder.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_EQ(BufferedOnceSettled(*server), 0u);
}

TEST(HttpLimitsTest, BodyBudgetBelowTheBodyLimitIsRefusedAtStart) {
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.max_body_bytes = 1000;
  options.max_buffered_body_bytes = 999;
  StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      options, [](const HttpRequest&, ResponseWriter& w) { w.Send(200, "text/plain", ""); });
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("max_buffered_body_bytes"), std::string::npos);
}

}  // namespace
}  // namespace tandem::agent::http
