#include "agent/http/http_server.h"

#include <atomic>
#include <cerrno>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/http/connection.h"
#include "agent/http/request_reader.h"
#include "agent/http/socket_io.h"
#include "common/logging.h"

namespace tandem::agent::http {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// After a failed accept (EMFILE, ENOBUFS...) the listener stays readable: back off, don't spin.
constexpr int kAcceptBackoffMs = 50;

StatusOr<asio::ip::address> ParseHost(const std::string& host) {
  if (host == "localhost") return asio::ip::address(asio::ip::address_v4::loopback());
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec)
    return Status::InvalidArgument("HTTP host '" + host + "' is not an IP address literal or localhost");
  return address;
}

std::string FormatPeer(const tcp::socket& socket) {
  boost::system::error_code ec;
  tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  asio::ip::address address = peer.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  std::string ip = address.to_string();
  if (address.is_v6()) ip = "[" + ip + "]";
  return ip + ":" + std::to_string(peer.port());
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

struct HttpServer::Impl {
  struct Connection {
    explicit Connection(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;  // closed by its own thread, under mu, when it ends
    std::thread thread;
    bool done = false;  // guarded by mu
  };

  explicit Impl(const HttpServerOptions& o)
      : options(o), body_budget(o.max_buffered_body_bytes, o.body_bytes_free_per_request) {}

  HttpServerOptions options;
  internal::BodyBudget body_budget;
  Handler handler;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  uint16_t port = 0;
  int wake_read_fd = -1;  // a byte on the pipe tells the accept loop to stop
  int wake_write_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open_connections{0};
  std::atomic<int64_t> active_requests{0};
  std::thread accept_thread;
  std::once_flag stop_once;
  std::mutex mu;
  std::list<std::unique_ptr<Connection>> connections;  // guarded by mu

  ~Impl() {
    if (wake_read_fd >= 0) ::close(wake_read_fd);
    if (wake_write_fd >= 0) ::close(wake_write_fd);
  }

  Status Listen(const asio::ip::address& address) {
    boost::system::error_code ec;
    tcp::endpoint endpoint(address, options.port);
    std::string where = options.host + ":" + std::to_string(options.port);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) acceptor.non_blocking(true, ec);
    if (ec) return Status::Unavailable("cannot listen on " + where + ": " + ec.message());
    port = acceptor.local_endpoint(ec).port();
    if (ec) return Status::Unavailable("cannot read the port of " + where + ": " + ec.message());
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
      return Status::Internal("pipe2 failed for the HTTP server");
    wake_read_fd = fds[0];
    wake_write_fd = fds[1];
    return Status::Ok();
  }

  // Waits for the listener or the wake pipe. False when the loop should end.
  bool WaitForAccept(int timeout_ms) {
    pollfd fds[2] = {{acceptor.native_handle(), POLLIN, 0}, {wake_read_fd, POLLIN, 0}};
    int rc = ::poll(fds, 2, timeout_ms);
    if (rc < 0 && errno != EINTR) {
      TANDEM_LOG(Error) << "HTTP accept loop: poll failed, errno " << errno;
      return false;
    }
    return !stopping.load() && (rc <= 0 || fds[1].revents == 0);
  }

  void AcceptLoop() {
    while (WaitForAccept(-1)) {
      ReapFinished();
      tcp::socket socket(io);
      boost::system::error_code ec;
      acceptor.accept(socket, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
      if (ec) {
        TANDEM_LOG(Warning) << "HTTP accept failed: " << ec.message();
        if (!WaitForAccept(kAcceptBackoffMs)) break;
        continue;
      }
      Admit(std::move(socket));
    }
  }

  void Admit(tcp::socket socket) {
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);  // each streamed chunk leaves at once
    const int64_t accepted_ms = internal::NowMs();
    std::string peer = FormatPeer(socket);
    if (open_connections.load() >= options.max_connections) {
      TANDEM_LOG(Warning) << "HTTP connection from " << peer << " refused: " << options.max_connections
                          << " connections open";
      internal::RejectConnection(
          socket.native_handle(), 503,
          "the server is at its limit of " + std::to_string(options.max_connections) + " open connections",
          /*linger_ms=*/0);
      socket.close(ec);
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    auto connection = std::make_unique<Connection>(std::move(socket));
    Connection* raw = connection.get();
    open_connections.fetch_add(1);  // before the thread can end and take it back
    try {
      raw->thread = std::thread([this, raw, peer, accepted_ms] { Run(raw, peer, accepted_ms); });
    } catch (const std::system_error& e) {
      TANDEM_LOG(Error) << "cannot start a thread for HTTP connection " << peer << ": " << e.what();
      internal::RejectConnection(raw->socket.native_handle(), 503, "the server cannot take a connection now",
                                 0);
      raw->socket.close(ec);
      open_connections.fetch_sub(1);
      return;
    }
    connections.push_back(std::move(connection));
  }

  void Run(Connection* connection, const std::string& peer, int64_t accepted_ms) {
    internal::ConnectionContext context{&options, &body_budget, &handler, &stopping, &active_requests};
    internal::ServeConnection(connection->socket.native_handle(), peer, accepted_ms, context);
    {
      // Admit() holds mu until the connection is listed, so this cannot overtake it.
      std::lock_guard<std::mutex> lock(mu);
      boost::system::error_code ec;
      connection->socket.close(ec);
      connection->done = true;
    }
    open_connections.fetch_sub(1);
  }

  void ReapFinished() {
    std::list<std::unique_ptr<Connection>> finished;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto it = connections.begin(); it != connections.end();) {
        auto next = std::next(it);
        if ((*it)->done) finished.splice(finished.end(), connections, it);
        it = next;
      }
    }
    for (auto& connection : finished) connection->thread.join();
  }

  void StopNow() {
    stopping.store(true);
    if (wake_write_fd >= 0) {
      char byte = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_write_fd, &byte, 1);
    }
    if (accept_thread.joinable()) accept_thread.join();
    boost::system::error_code ec;
    acceptor.close(ec);
    std::list<std::unique_ptr<Connection>> all;
    {
      std::lock_guard<std::mutex> lock(mu);
      // Wakes reads and fails writes; the descriptor stays valid until its thread closes it.
      for (auto& connection : connections) {
        if (!connection->done) ::shutdown(connection->socket.native_handle(), SHUT_RDWR);
      }
      all.swap(connections);
    }
    for (auto& connection : all) connection->thread.join();
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, Handler handler) {
  if (!handler) return Status::InvalidArgument("HttpServer::Start needs a handler");
  StatusOr<asio::ip::address> address = ParseHost(options.host);
  if (!address.ok()) return address.status();
  if (options.max_buffered_body_bytes < options.max_body_bytes) {
    return Status::InvalidArgument(
        "HTTP max_buffered_body_bytes (" + std::to_string(options.max_buffered_body_bytes) +
        ") is below max_body_bytes (" + std::to_string(options.max_body_bytes) + ")");
  }
  auto impl = std::make_unique<Impl>(options);
  impl->handler = std::move(handler);
  Status listened = impl->Listen(address.value());
  if (!listened.ok()) return listened;
  Impl* raw = impl.get();
  try {
    impl->accept_thread = std::thread([raw] { raw->AcceptLoop(); });
  } catch (const std::system_error& e) {
    return Status::Internal(std::string("cannot start the HTTP accept thread: ") + e.what());
  }
  TANDEM_LOG(Info) << "HTTP server listening on " << options.host << ":" << impl->port;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port; }

size_t HttpServer::open_connections() const { return impl_->open_connections.load(); }

size_t HttpServer::buffered_body_bytes() const { return impl_->body_budget.used(); }

int64_t HttpServer::active_requests() const { return impl_->active_requests.load(); }

void HttpServer::Stop() {
  std::call_once(impl_->stop_once, [this] { impl_->StopNow(); });
}

}  // namespace tandem::agent::http
