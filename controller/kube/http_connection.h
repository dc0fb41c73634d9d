#pragma once
// Internal to http_client.cc: one keep-alive connection (plain TCP or TLS) driven by its own
// io_context on whichever thread holds it, with an overall deadline and cross-thread abort.
// Includes Boost.Asio/Beast: never include this from a public header.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "common/status.h"

namespace tandem::controller::kube::internal {

using SteadyTime = std::chrono::steady_clock::time_point;

struct Endpoint {
  bool tls = false;
  std::string host;  // without brackets
  std::string port;
  std::string host_header;  // "host:port", IPv6 bracketed
};

// Parses "http(s)://host[:port][/]". InvalidArgument otherwise.
StatusOr<Endpoint> ParseServer(const std::string& server);

class Connection {
 public:
  // `tls_context` is null for plain HTTP; `server_name` is verified and sent as SNI (empty: skip
  // verification of the name, as with insecure-skip-tls-verify).
  Connection(const Endpoint& endpoint, boost::asio::ssl::context* tls_context, std::string server_name,
             bool verify_name);

  // Resolves, connects and (for TLS) handshakes, all before `deadline`.
  Status Open(SteadyTime deadline);

  // Runs one asynchronous step started by `start` (which receives the completion handler) until
  // it completes or `deadline` passes (then the socket is closed and DeadlineExceeded returned).
  // `deadline` nullopt: no deadline. Errors: Cancelled after Abort(), else Unavailable.
  using Handler = std::function<void(boost::beast::error_code, std::size_t)>;
  Status Run(const std::function<void(Handler)>& start, std::optional<SteadyTime> deadline, const char* what,
             std::size_t* transferred = nullptr);

  // Thread-safe: makes the current and every later step fail with Cancelled.
  void Abort();

  // True when the idle socket has been closed by the peer or has unexpected data (not reusable).
  bool Stale();

  bool aborted() const { return aborted_.load(); }
  bool broken() const { return broken_; }
  void MarkBroken() { broken_ = true; }

  template <typename Fn>
  auto WithStream(Fn&& fn) {
    if (tls_) return fn(*tls_);
    return fn(*plain_);
  }
  boost::beast::flat_buffer& buffer() { return buffer_; }

 private:
  void CloseNow();
  boost::asio::ip::tcp::socket& Lowest() { return tls_ ? tls_->next_layer() : *plain_; }

  Endpoint endpoint_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::ip::tcp::socket> plain_;                          // http
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls_;  // https
  boost::asio::ip::tcp::resolver resolver_;
  std::string server_name_;
  bool verify_name_;
  boost::beast::flat_buffer buffer_;
  std::atomic<bool> aborted_{false};
  bool broken_ = false;
};

}  // namespace tandem::controller::kube::internal
