// The Beast side of controller/metrics/server.h: an acceptor and one async session per
// connection, all on a single io_context thread. Asio calls use error_code overloads; the rare
// throwing ones (allocation, thread start) are caught here and become Status.
#include "controller/metrics/server.h"

#include <chrono>
#include <exception>
#include <optional>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/logging.h"

namespace tandem::controller::metrics {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr std::chrono::seconds kIoTimeout(10);
constexpr uint32_t kHeaderLimitBytes = 16 * 1024;
constexpr uint64_t kBodyLimitBytes = 64 * 1024;  // probes and scrapes send no body

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const ServerOptions& options) : stream_(std::move(socket)), options_(options) {}

  void Read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimitBytes);
    parser_->body_limit(kBodyLimitBytes);
    stream_.expires_after(kIoTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

 private:
  void OnRead(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return Close();
    }
    if (ec) {  // a malformed request: answer 400 once, then hang up
      return Write(Response{400, "text/plain; charset=utf-8", "bad request: " + ec.message() + "\n"},
                   /*head=*/false, /*keep_alive=*/false, 11);
    }
    http::request<http::string_body> req = parser_->release();
    const bool head = req.method() == http::verb::head;
    Response r = Handle(options_, std::string_view(req.method_string().data(), req.method_string().size()),
                        std::string_view(req.target().data(), req.target().size()));
    Write(std::move(r), head, req.keep_alive(), req.version());
  }

  void Write(Response r, bool head, bool keep_alive, unsigned version) {
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), version);
    res->set(http::field::server, "tandem-controller");
    res->set(http::field::content_type, r.content_type);
    if (r.status == 405) res->set(http::field::allow, "GET, HEAD");
    res->keep_alive(keep_alive);
    if (head) {
      res->content_length(r.body.size());  // what GET would send, without the body
    } else {
      res->body() = std::move(r.body);
      res->prepare_payload();
    }
    stream_.expires_after(kIoTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, keep_alive](beast::error_code ec, std::size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const ServerOptions& options_;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;  // sessions refer to it: destroyed after the io_context
  std::optional<net::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  tcp::endpoint bound;
  std::thread thread;

  void Accept() {
    acceptor->async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), options)->Read();
      Accept();  // a failed accept (e.g. out of descriptors) must not stop the server
    });
  }

  void Run() {
    for (;;) {
      try {
        ioc->run();
        return;
      } catch (const std::exception& e) {  // a handler threw (allocation): keep serving
        TANDEM_LOG(Error) << "metrics server: " << e.what();
      }
    }
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  if (options.metrics == nullptr && !options.serve_health) {
    return Status::InvalidArgument("metrics server: nothing to serve (no metrics, no health)");
  }
  ASSIGN_OR_RETURN(BindAddress where, ParseBindAddress(options.bind_address));
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const std::string& text = impl->options.bind_address;
  try {
    impl->ioc.emplace(1);
    beast::error_code ec;
    net::ip::address ip = net::ip::make_address(where.host, ec);
    if (ec) return Status::InvalidArgument("bind address \"" + text + "\": " + ec.message());
    tcp::endpoint endpoint(ip, where.port);
    impl->acceptor.emplace(*impl->ioc);
    if (impl->acceptor->open(endpoint.protocol(), ec) ||
        impl->acceptor->set_option(net::socket_base::reuse_address(true), ec) ||
        impl->acceptor->bind(endpoint, ec) ||
        impl->acceptor->listen(net::socket_base::max_listen_connections, ec)) {
      return Status::Unavailable("metrics server: cannot listen on " + text + ": " + ec.message());
    }
    impl->bound = impl->acceptor->local_endpoint(ec);
    if (ec) return Status::Unavailable("metrics server: " + ec.message());
    impl->Accept();
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->Run(); });
  } catch (const std::exception& e) {
    return Status::Internal(std::string("metrics server: ") + e.what());
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const { return impl_->bound.port(); }

std::string Server::address() const {
  const net::ip::address a = impl_->bound.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(port());
}

void Server::Stop() {
  if (!impl_->ioc) return;
  impl_->ioc->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  // Destroying the io_context destroys the pending handlers and with them every session, which
  // closes the connections.
  impl_->acceptor.reset();
  impl_->ioc.reset();
}

}  // namespace tandem::controller::metrics
