#include "controller/metrics/server.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "controller/metrics/controller_metrics.h"

namespace tandem::controller::metrics {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A blocking HTTP/1.1 client over one connection to 127.0.0.1:port.
class Client {
 public:
  explicit Client(uint16_t port) : socket_(ioc_) {
    socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }
  http::response<http::string_body> Send(http::verb method, const std::string& target,
                                         bool keep_alive = true) {
    http::request<http::empty_body> req(method, target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(keep_alive);
    http::write(socket_, req);
    http::response_parser<http::string_body> parser;
    parser.skip(method == http::verb::head);
    http::read(socket_, buffer_, parser);
    return parser.release();
  }
  // Sends raw bytes and returns everything until the server closes the connection.
  std::string Raw(const std::string& bytes) {
    net::write(socket_, net::buffer(bytes));
    std::string out;
    beast::error_code ec;
    char chunk[4096];
    for (;;) {
      size_t n = socket_.read_some(net::buffer(chunk), ec);
      out.append(chunk, n);
      if (ec) break;
    }
    return out;
  }

 private:
  net::io_context ioc_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

class ServerTest : public ::testing::Test {
 protected:
  void StartServer() {
    ServerOptions options;
    options.bind_address = "127.0.0.1:0";
    options.metrics = &metrics_;
    options.readiness_checks = {
        {"informers-synced",
         [this] { return synced_ ? Status::Ok() : Status::Unavailable("2 of 3 informers synced"); }},
        {"leader-election", [] { return Status::Ok(); }}};
    StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    ASSERT_NE(server_->port(), 0);
  }

  ControllerMetrics metrics_;
  std::atomic<bool> synced_{false};
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, ScrapesMetricsOverARealSocket) {
  StartServer();
  metrics_.ObserveReconcile("modelpool", kResultSuccess, 0.05);
  metrics_.SetLeader(true);
  Client c(server_->port());
  auto res = c.Send(http::verb::get, "/metrics");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(
      res.body().find(R"(tandem_controller_reconcile_total{controller="modelpool",result="success"} 1)"),
      std::string::npos);
  EXPECT_NE(res.body().find("\ntandem_controller_leader 1\n"), std::string::npos);
  EXPECT_EQ(res.body(), metrics_.Serialize());
}

TEST_F(ServerTest, HealthzReadyzAndUnknownPathsOnOneKeptAliveConnection) {
  StartServer();
  Client c(server_->port());
  auto healthz = c.Send(http::verb::get, "/healthz");
  EXPECT_EQ(healthz.result_int(), 200);
  EXPECT_EQ(healthz.body(), "ok");
  auto not_ready = c.Send(http::verb::get, "/readyz");
  EXPECT_EQ(not_ready.result_int(), 503);
  EXPECT_NE(not_ready.body().find("[-]informers-synced failed: 2 of 3 informers synced\n"),
            std::string::npos);
  EXPECT_NE(not_ready.body().find("[+]leader-election ok\n"), std::string::npos);
  synced_ = true;
  auto ready = c.Send(http::verb::get, "/readyz");
  EXPECT_EQ(ready.result_int(), 200);
  EXPECT_EQ(ready.body(), "ok");
  auto verbose = c.Send(http::verb::get, "/readyz?verbose");
  EXPECT_EQ(verbose.body(), "[+]informers-synced ok\n[+]leader-election ok\nreadyz check passed\n");
  synced_ = false;
  EXPECT_EQ(c.Send(http::verb::get, "/readyz").result_int(), 503);
  EXPECT_EQ(c.Send(http::verb::get, "/nope").result_int(), 404);
  EXPECT_EQ(c.Send(http::verb::get, "/").result_int(), 404);
  auto post = c.Send(http::verb::post, "/metrics");
  EXPECT_EQ(post.result_int(), 405);
  EXPECT_EQ(post[http::field::allow], "GET, HEAD");
  auto head = c.Send(http::verb::head, "/healthz");
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_EQ(head[http::field::content_length], "2");
  EXPECT_EQ(head.body(), "");
}

TEST_F(ServerTest, MalformedRequestGets400AndTheServerKeepsServing) {
  StartServer();
  {
    Client bad(server_->port());
    std::string reply = bad.Raw("NOT HTTP AT ALL\r\n\r\n");
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  }
  Client good(server_->port());
  EXPECT_EQ(good.Send(http::verb::get, "/healthz").result_int(), 200);
}

TEST_F(ServerTest, ClosesWhenTheClientAsksAndStopIsIdempotent) {
  StartServer();
  Client c(server_->port());
  auto res = c.Send(http::verb::get, "/healthz", /*keep_alive=*/false);
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(c.Raw(""), "");  // the server hung up after answering
  const uint16_t port = server_->port();
  server_->Stop();
  server_->Stop();
  net::io_context ioc;
  tcp::socket s(ioc);
  beast::error_code ec;
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  EXPECT_TRUE(ec) << "still listening after Stop";
}

TEST_F(ServerTest, AStalledClientDoesNotHoldUpOthers) {
  StartServer();
  net::io_context ioc;
  tcp::socket stalled(ioc);
  stalled.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
  net::write(stalled, net::buffer(std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n")));  // no end
  Client other(server_->port());
  EXPECT_EQ(other.Send(http::verb::get, "/healthz").result_int(), 200);
}

TEST_F(ServerTest, ConcurrentScrapesWhileMetricsChange) {
  StartServer();
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; !done; ++i) {
      metrics_.ObserveReconcile(i % 2 ? "modelpool" : "modeldeployment", kResultSuccess, 0.001 * (i % 100));
      metrics_.SetPoolReplicas("d", "d-" + std::to_string(i % 5), kReplicasReady, i);
      if (i % 7 == 0) metrics_.ForgetPool("d", "d-" + std::to_string(i % 5));
    }
  });
  std::atomic<int> ok{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&] {
      Client c(server_->port());
      for (int i = 0; i < 40; ++i) {
        auto res = c.Send(http::verb::get, i % 4 ? "/metrics" : "/readyz");
        if (res.result_int() == 200 || res.result_int() == 503) ++ok;
      }
    });
  }
  for (std::thread& r : readers) r.join();
  done = true;
  writer.join();
  EXPECT_EQ(ok.load(), 6 * 40);
}

TEST(ServerStartTest, RejectsBadAddressesAndBusyPorts) {
  ControllerMetrics metrics;
  ServerOptions o;
  o.metrics = &metrics;
  for (const char* bad : {"8080", "host:80", ":99999", ":", "1.2.3:80", "[::1:80", "[]:80"}) {
    o.bind_address = bad;
    StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  o.bind_address = "127.0.0.1:0";
  StatusOr<std::unique_ptr<Server>> first = Server::Start(o);
  ASSERT_TRUE(first.ok());
  o.bind_address = "127.0.0.1:" + std::to_string((*first)->port());
  EXPECT_EQ(Server::Start(o).status().code(), StatusCode::kUnavailable);
  o.metrics = nullptr;
  o.serve_health = false;
  o.bind_address = "127.0.0.1:0";
  EXPECT_EQ(Server::Start(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ServerStartTest, ParsesControllerRuntimeAddressForms) {
  StatusOr<BindAddress> all = ParseBindAddress(":8080");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->host, "0.0.0.0");
  EXPECT_EQ(all->port, 8080);
  EXPECT_EQ(ParseBindAddress("localhost:0")->host, "127.0.0.1");
  EXPECT_EQ(ParseBindAddress("[::1]:9")->host, "::1");
  EXPECT_EQ(ParseBindAddress("10.0.0.7:65535")->port, 65535);
}

TEST(ServerHandleTest, EndpointsFollowTheOptions) {
  ServerOptions health_only;  // the health-probe server: no /metrics
  EXPECT_EQ(Handle(health_only, "GET", "/metrics").status, 404);
  EXPECT_EQ(Handle(health_only, "GET", "/readyz").status, 200);  // no checks: ready
  ControllerMetrics metrics;
  ServerOptions metrics_only;
  metrics_only.metrics = &metrics;
  metrics_only.serve_health = false;
  EXPECT_EQ(Handle(metrics_only, "GET", "/healthz").status, 404);
  EXPECT_EQ(Handle(metrics_only, "GET", "/metrics?x=1").status, 200);
  ServerOptions broken;
  broken.readiness_checks = {{"empty", nullptr}};
  EXPECT_EQ(Handle(broken, "GET", "/readyz").status, 503);
}

// promtool (Debian package `prometheus`) lints a real scrape: names, HELP/TYPE, histogram
// series, counter suffixes.
TEST_F(ServerTest, PromtoolAcceptsTheExposition) {
#ifndef TANDEM_PROMTOOL
  GTEST_SKIP() << "promtool not found at configure time (apt-get install prometheus)";
#else
  StartServer();
  metrics_.ObserveReconcile("modeldeployment", kResultSuccess, 0.02);
  metrics_.ObserveReconcile("modeldeployment", kResultError, 1.5);
  metrics_.SetPoolReplicas("kimi", "kimi-decode", kReplicasReady, 2);
  metrics_.CountAutoscalerDecision("llm", "decode", "up");
  metrics_.SetWorkQueueDepth("modelpool", 3);
  metrics_.CountWorkQueueAdd("modelpool");
  metrics_.CountWorkQueueRetry("modelpool");
  metrics_.ObserveWorkQueueLatency("modelpool", 0.001);
  metrics_.ObserveWorkQueueWork("modelpool", 0.2);
  metrics_.SetLeader(true);
  Client c(server_->port());
  auto res = c.Send(http::verb::get, "/metrics");
  ASSERT_EQ(res.result_int(), 200);
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string stem = (dir / ("tandem_scrape_" + std::to_string(server_->port()))).string();
  std::ofstream(stem + ".prom") << res.body();
  const std::string cmd =
      std::string(TANDEM_PROMTOOL) + " check metrics < " + stem + ".prom > " + stem + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(stem + ".out");
  std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove((stem + ".prom").c_str());
  std::remove((stem + ".out").c_str());
  EXPECT_EQ(rc, 0) << report;
  EXPECT_EQ(report, "");  // no lint warnings either
#endif
}

}  // namespace
}  // namespace tandem::controller::metrics
