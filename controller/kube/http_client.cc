#include "controller/kube/http_client.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <utility>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>
#include <openssl/ssl.h>

#include "controller/kube/http_connection.h"
#include "controller/kube/line_splitter.h"

namespace tandem::controller::kube {

namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using internal::Connection;
using internal::SteadyTime;

namespace {

constexpr uint64_t kMaxBodyBytes = 256ull << 20;  // a List of everything stays far below this

StatusOr<std::unique_ptr<ssl::context>> MakeTlsContext(const HttpClientOptions& o) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (o.insecure_skip_tls_verify) {
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    ctx->set_verify_mode(ssl::verify_peer);
    if (o.ca_pem.empty()) {
      ctx->set_default_verify_paths(ec);
      if (ec) return Status::InvalidArgument("TLS: cannot load the system CA paths: " + ec.message());
    } else {
      ctx->add_certificate_authority(boost::asio::buffer(o.ca_pem), ec);
      if (ec)
        return Status::InvalidArgument("TLS: certificate-authority is not a usable PEM: " + ec.message());
    }
  }
  if (!o.client_cert_pem.empty()) {
    ctx->use_certificate_chain(boost::asio::buffer(o.client_cert_pem), ec);
    if (ec) return Status::InvalidArgument("TLS: client-certificate is not a usable PEM: " + ec.message());
    ctx->use_private_key(boost::asio::buffer(o.client_key_pem), ssl::context::pem, ec);
    if (ec) return Status::InvalidArgument("TLS: client-key is not a usable PEM key: " + ec.message());
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      return Status::InvalidArgument("TLS: client-key does not match client-certificate");
    }
  }
  return ctx;
}

}  // namespace

struct HttpClient::Impl {
  HttpClientOptions options;
  internal::Endpoint endpoint;
  std::unique_ptr<ssl::context> tls;  // null for http
  std::mutex mu;
  std::vector<std::unique_ptr<Connection>> idle;  // guarded by mu
  std::atomic<uint64_t> opened{0};

  SteadyTime Deadline(int64_t timeout_ms) const {
    return std::chrono::steady_clock::now() +
           std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : options.request_timeout_ms);
  }

  StatusOr<std::unique_ptr<Connection>> Open(SteadyTime deadline) {
    const std::string name = options.tls_server_name.empty() ? endpoint.host : options.tls_server_name;
    auto conn = std::make_unique<Connection>(endpoint, tls.get(), name, !options.insecure_skip_tls_verify);
    opened.fetch_add(1);
    const SteadyTime connect_deadline = std::min(
        deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(options.connect_timeout_ms));
    Status s = conn->Open(connect_deadline);
    if (!s.ok()) return s;
    return conn;
  }

  // An idle pooled connection that still looks alive, or null.
  std::unique_ptr<Connection> TakeIdle() {
    std::lock_guard<std::mutex> lock(mu);
    while (!idle.empty()) {
      std::unique_ptr<Connection> c = std::move(idle.back());
      idle.pop_back();
      if (!c->Stale()) return c;
    }
    return nullptr;
  }

  void Release(std::unique_ptr<Connection> c) {
    if (c->broken() || c->aborted()) return;
    std::lock_guard<std::mutex> lock(mu);
    if (static_cast<int>(idle.size()) < options.max_idle_connections) idle.push_back(std::move(c));
  }

  http::request<http::string_body> BuildRequest(const HttpRequest& r) const {
    http::request<http::string_body> req;
    req.method_string(r.method);
    req.target(r.target);
    req.version(11);
    req.set(http::field::host, endpoint.host_header);
    req.set(http::field::user_agent, options.user_agent);
    req.set(http::field::accept, "application/json");
    if (!r.bearer_token.empty()) req.set(http::field::authorization, "Bearer " + r.bearer_token);
    if (!r.content_type.empty()) req.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) req.set(k, v);
    req.keep_alive(true);
    req.body() = r.body;
    req.prepare_payload();
    return req;
  }

  // Writes the request and reads the response header. `header_bytes` tells the caller whether
  // anything came back (a reused connection that fails before that may be retried).
  Status SendAndReadHeader(Connection& c, const http::request<http::string_body>& req,
                           http::response_parser<http::buffer_body>& parser,
                           std::optional<SteadyTime> deadline, bool* got_header) {
    *got_header = false;
    RETURN_IF_ERROR(
        c.Run([&](Connection::Handler h) { c.WithStream([&](auto& s) { http::async_write(s, req, h); }); },
              deadline, "sending the request"));
    RETURN_IF_ERROR(c.Run(
        [&](Connection::Handler h) {
          c.WithStream([&](auto& s) { http::async_read_header(s, c.buffer(), parser, h); });
        },
        deadline, "reading the response header"));
    *got_header = true;
    return Status::Ok();
  }

  // Reads the body piece by piece into `sink` until it ends or sink returns false.
  Status ReadBody(Connection& c, http::response_parser<http::buffer_body>& parser,
                  std::optional<SteadyTime> deadline, const std::function<bool(std::string_view)>& sink) {
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      Status s = c.Run(
          [&](Connection::Handler h) {
            c.WithStream([&](auto& st) {
              http::async_read_some(st, c.buffer(), parser, [h](boost::beast::error_code ec, std::size_t n) {
                if (ec == http::error::need_buffer) ec = {};
                h(ec, n);
              });
            });
          },
          deadline, "reading the response body");
      if (!s.ok()) return s;
      const size_t got = sizeof(chunk) - parser.get().body().size;
      if (got > 0 && !sink(std::string_view(chunk, got))) {
        c.MarkBroken();  // unread body left: not reusable
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

  struct Exchange {
    std::unique_ptr<Connection> conn;
    std::optional<http::response_parser<http::buffer_body>> parser;
    uint64_t conn_cancel_id = 0;
  };

  // Returns the connection to the pool when the exchange ended cleanly and the server keeps it.
  void Finish(const HttpRequest& r, Exchange& ex, bool reusable) {
    if (r.cancel != nullptr) {
      r.cancel->Unregister(ex.conn_cancel_id);
      // An abort may be queued on the connection's io_context: never hand it to someone else.
      if (r.cancel->cancelled()) ex.conn->MarkBroken();
    }
    if (!reusable || !ex.parser->is_done() || !ex.parser->keep_alive()) ex.conn->MarkBroken();
    Release(std::move(ex.conn));
  }

  // Obtains a connection (pooled unless `fresh`), sends, reads the header. Retries once on a
  // fresh connection when a reused one fails before any response byte.
  Status Start(const HttpRequest& r, bool fresh, std::optional<SteadyTime> deadline,
               SteadyTime connect_deadline, Exchange* ex) {
    const http::request<http::string_body> req = BuildRequest(r);
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::unique_ptr<Connection> conn = fresh || attempt > 0 ? nullptr : TakeIdle();
      const bool reused = conn != nullptr;
      if (!reused) {
        ASSIGN_OR_RETURN(conn, Open(connect_deadline));
      }
      ex->parser.emplace();
      ex->parser->body_limit(kMaxBodyBytes);
      uint64_t cancel_id = 0;
      Connection* raw = conn.get();
      if (r.cancel != nullptr) cancel_id = r.cancel->Register([raw] { raw->Abort(); });
      bool got_header = false;
      Status s = SendAndReadHeader(*conn, req, *ex->parser, deadline, &got_header);
      if (s.ok()) {
        ex->conn = std::move(conn);
        ex->conn_cancel_id = cancel_id;
        return s;
      }
      if (r.cancel != nullptr) r.cancel->Unregister(cancel_id);
      const bool retry = reused && !got_header && s.code() == StatusCode::kUnavailable;
      if (!retry) return s;
    }
    return Status::Unavailable("unreachable");
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

StatusOr<std::unique_ptr<HttpClient>> HttpClient::New(HttpClientOptions options) {
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->endpoint, internal::ParseServer(options.server));
  if (impl->endpoint.tls) {
    ASSIGN_OR_RETURN(impl->tls, MakeTlsContext(options));
  }
  impl->options = std::move(options);
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

StatusOr<HttpResponse> HttpClient::Do(const HttpRequest& r) {
  const SteadyTime deadline = impl_->Deadline(r.timeout_ms);
  Impl::Exchange ex;
  RETURN_IF_ERROR(impl_->Start(r, /*fresh=*/false, deadline, deadline, &ex));
  HttpResponse response;
  response.status = static_cast<int>(ex.parser->get().result_int());
  response.content_type = std::string(ex.parser->get()[http::field::content_type]);
  const uint64_t cap = impl_->options.max_body_bytes;
  bool too_long = false;
  Status s = impl_->ReadBody(*ex.conn, *ex.parser, deadline, [&](std::string_view data) {
    if (response.body.size() + data.size() > cap) {
      too_long = true;  // stop reading: ReadBody marks the connection unusable
      return false;
    }
    response.body.append(data);
    return true;
  });
  impl_->Finish(r, ex, s.ok() && !too_long);
  if (!s.ok()) return s;
  if (too_long) {
    return Status::InvalidArgument("the response body is over " + std::to_string(cap) + " bytes (" +
                                   r.method + " " + r.target.substr(0, 128) + ")");
  }
  return response;
}

StatusOr<HttpResponse> HttpClient::Stream(const HttpRequest& r, const LineCallback& on_line) {
  const auto now = std::chrono::steady_clock::now();
  std::optional<SteadyTime> deadline;
  if (r.timeout_ms > 0) deadline = now + std::chrono::milliseconds(r.timeout_ms);
  const SteadyTime connect_deadline =
      deadline.value_or(now + std::chrono::milliseconds(impl_->options.connect_timeout_ms));
  Impl::Exchange ex;
  RETURN_IF_ERROR(impl_->Start(r, /*fresh=*/true, deadline, connect_deadline, &ex));
  HttpResponse response;
  response.status = static_cast<int>(ex.parser->get().result_int());
  response.content_type = std::string(ex.parser->get()[http::field::content_type]);
  Status s;
  if (response.status < 200 || response.status > 299) {
    // An error body is small and must not hang the caller: bound it by the request timeout.
    s = impl_->ReadBody(*ex.conn, *ex.parser, deadline.value_or(impl_->Deadline(0)),
                        [&](std::string_view data) {
                          response.body.append(data);
                          return true;
                        });
  } else {
    ex.parser->body_limit(boost::none);
    LineSplitter lines(kMaxBodyBytes);
    s = impl_->ReadBody(*ex.conn, *ex.parser, deadline,
                        [&](std::string_view data) { return lines.Feed(data, on_line); });
    if (s.ok()) {
      lines.Finish(on_line);  // the last line had no newline
      s = lines.status();
    }
  }
  impl_->Finish(r, ex, false);  // a stream's connection is never pooled
  if (!s.ok()) return s;
  return response;
}

uint64_t HttpClient::connections_opened() const { return impl_->opened.load(); }

}  // namespace tandem::controller::kube
