#include "controller/kube/http_connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

namespace tandem::controller::kube::internal {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

StatusOr<Endpoint> ParseServer(const std::string& server) {
  Endpoint e;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    e.tls = true;
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    rest = server.substr(7);
  } else {
    return Status::InvalidArgument("server " + server + ": must start with https:// or http://");
  }
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return Status::InvalidArgument("server " + server + ": a path prefix is not supported");
  }
  size_t port_colon = std::string::npos;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) return Status::InvalidArgument("server " + server + ": unclosed [");
    e.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return Status::InvalidArgument("server " + server + ": junk after ]");
      port_colon = close + 1;
    }
  } else {
    port_colon = rest.rfind(':');
    e.host = rest.substr(0, port_colon);
  }
  e.port = port_colon == std::string::npos ? (e.tls ? "443" : "80") : rest.substr(port_colon + 1);
  if (e.host.empty()) return Status::InvalidArgument("server " + server + ": no host");
  if (e.port.empty() || e.port.find_first_not_of("0123456789") != std::string::npos || e.port.size() > 5 ||
      std::stoi(e.port) == 0 || std::stoi(e.port) > 65535) {
    return Status::InvalidArgument("server " + server + ": bad port '" + e.port + "'");
  }
  const bool ipv6 = e.host.find(':') != std::string::npos;
  e.host_header = (ipv6 ? "[" + e.host + "]" : e.host) + ":" + e.port;
  return e;
}

Connection::Connection(const Endpoint& endpoint, ssl::context* tls_context, std::string server_name,
                       bool verify_name)
    : endpoint_(endpoint), resolver_(ioc_), server_name_(std::move(server_name)), verify_name_(verify_name) {
  if (tls_context != nullptr) {
    tls_.emplace(ioc_, *tls_context);
  } else {
    plain_.emplace(ioc_);
  }
}

void Connection::CloseNow() {
  boost::system::error_code ignored;
  resolver_.cancel();
  Lowest().close(ignored);
}

void Connection::Abort() {
  aborted_.store(true);
  // Runs on the thread driving ioc_ (or at its next Run), so the socket is never touched by two
  // threads at once.
  net::post(ioc_, [this] { CloseNow(); });
}

Status Connection::Run(const std::function<void(Handler)>& start, std::optional<SteadyTime> deadline,
                       const char* what, std::size_t* transferred) {
  if (aborted_.load()) {
    broken_ = true;
    return Status::Cancelled(std::string(what) + ": cancelled");
  }
  bool done = false;
  bool timed_out = false;
  boost::beast::error_code result;
  std::size_t bytes = 0;
  ioc_.restart();
  start([&](boost::beast::error_code ec, std::size_t n) {
    result = ec;
    bytes = n;
    done = true;
  });
  while (!done) {
    std::size_t ran = 0;
    if (deadline && !timed_out) {
      ran = ioc_.run_one_until(*deadline);
      if (!done && std::chrono::steady_clock::now() >= *deadline) {
        timed_out = true;
        CloseNow();
        continue;
      }
    } else {
      ran = ioc_.run_one();
    }
    if (ran == 0 && ioc_.stopped() && !done) {
      broken_ = true;
      return Status::Internal(std::string(what) + ": I/O loop ran out of work");
    }
  }
  if (transferred != nullptr) *transferred = bytes;
  if (!result) return Status::Ok();
  broken_ = true;
  if (aborted_.load()) return Status::Cancelled(std::string(what) + ": cancelled");
  if (timed_out) return Status::DeadlineExceeded(std::string(what) + ": timed out");
  return Status::Unavailable(std::string(what) + ": " + result.message());
}

Status Connection::Open(SteadyTime deadline) {
  tcp::resolver::results_type endpoints;
  RETURN_IF_ERROR(Run(
      [&](Handler h) {
        resolver_.async_resolve(endpoint_.host, endpoint_.port,
                                [&, h](boost::beast::error_code ec, tcp::resolver::results_type r) {
                                  endpoints = std::move(r);
                                  h(ec, 0);
                                });
      },
      deadline, ("resolving " + endpoint_.host).c_str()));
  const std::string where = "connecting to " + endpoint_.host_header;
  RETURN_IF_ERROR(Run(
      [&](Handler h) {
        net::async_connect(Lowest(), endpoints,
                           [h](boost::beast::error_code ec, const tcp::endpoint&) { h(ec, 0); });
      },
      deadline, where.c_str()));
  boost::system::error_code ignored;
  Lowest().set_option(tcp::no_delay(true), ignored);
  // A watch has no read deadline: TCP keepalive notices a peer that vanished without a FIN
  // (about 30 s idle + 3 probes 10 s apart) so the stream fails instead of hanging.
  Lowest().set_option(net::socket_base::keep_alive(true), ignored);
  const int fd = Lowest().native_handle();
  const int idle_s = 30, interval_s = 10, probes = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
  if (!tls_) return Status::Ok();

  boost::system::error_code ec_addr;
  net::ip::make_address(server_name_, ec_addr);
  const bool is_ip = !ec_addr;
  if (!is_ip && !server_name_.empty() &&
      !SSL_set_tlsext_host_name(tls_->native_handle(), server_name_.c_str())) {
    broken_ = true;
    return Status::Internal(where + ": cannot set SNI");
  }
  if (verify_name_) tls_->set_verify_callback(ssl::host_name_verification(server_name_));
  return Run(
      [&](Handler h) {
        tls_->async_handshake(ssl::stream_base::client, [h](boost::beast::error_code ec) { h(ec, 0); });
      },
      deadline, ("TLS handshake with " + endpoint_.host_header).c_str());
}

bool Connection::Stale() {
  if (broken_ || aborted_.load() || !Lowest().is_open()) return true;
  if (buffer_.size() != 0) return true;  // bytes nobody asked for
  pollfd pfd{};
  pfd.fd = Lowest().native_handle();
  pfd.events = POLLIN;
  // Readable while idle means the peer closed (EOF) or sent something unexpected.
  return ::poll(&pfd, 1, 0) != 0;
}

}  // namespace tandem::controller::kube::internal
