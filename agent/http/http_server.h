#pragma once
// The agent's HTTP/1.1 server (Boost.Beast, blocking sockets, one thread per connection): the
// OpenAI API on the router and standalone roles, and /metrics, /healthz, /readyz on every role.
//
// Limits that keep a bad client from hurting anyone else:
// - the request head (request line + headers) must be complete within header_timeout_ms of the
//   connection's accept (first request) or of the next request's first byte (kept-alive
//   connections), however slowly the bytes trickle in (slow-loris): else the connection closes
//   without an answer;
// - a body over max_body_bytes gets 413 before it is read, a head over max_header_bytes 431, a
//   malformed request 400 (all with an OpenAI-shaped JSON error, then the connection closes); a
//   body that stalls for idle_timeout_ms closes the connection;
// - at most max_connections connections at once; one more is answered 503 and closed;
// - request bodies held at once, all connections together, stay within max_buffered_body_bytes
//   (beyond a small part of each that is not charged): a body that does not fit (its declared Content-Length
//   at the end of the head, before it is read or "100 Continue" sent; a chunked body as it grows) is answered
//   429 with Retry-After and the connection closes; its bytes go back when its handler returns;
// - a write that cannot make progress for 30 s fails (the client stopped reading).
// Keep-alive (and pipelining) is supported; a connection idle for idle_timeout_ms is closed.
// "Expect: 100-continue" is answered by the server itself.
//
// Handlers run on the connection's thread and may block (a streaming response waits for tokens).
// A handler learns that its client went away from ResponseWriter::ClientGone() (cheap, never
// blocks) or from a failed WriteChunk.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem::agent::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // target without the query: "/v1/models"
  std::string query;   // after '?', may be empty
  // Header names lower-cased; repeated headers joined with ", ".
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string peer;  // "127.0.0.1:53422"

  // The first header named `name` (lower-case), or empty.
  std::string_view Header(std::string_view name) const;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// How a handler answers. Exactly one of Send or BeginStream (then WriteChunk..., EndStream).
// A handler that returns without answering (or throws before answering) gets a 500. A stream the
// handler leaves without EndStream is cut off (the connection closes without the last chunk), so
// the client can tell it is incomplete. For HEAD requests the body is not sent. Used only from
// the handler's thread.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A whole response with Content-Length.
  virtual void Send(int status, std::string_view content_type, std::string_view body,
                    const HeaderList& extra_headers = {}) = 0;
  // Starts a streamed response (Transfer-Encoding: chunked, no-cache; for text/event-stream).
  // False when the client is gone.
  virtual bool BeginStream(int status, std::string_view content_type,
                           const HeaderList& extra_headers = {}) = 0;
  // Writes one piece now (flushed). False when the client is gone: stop producing.
  virtual bool WriteChunk(std::string_view data) = 0;
  // Ends the streamed response (the last chunk).
  virtual void EndStream() = 0;
  // True once the peer has closed or reset the connection (a non-blocking check of the socket).
  virtual bool ClientGone() = 0;
};

using Handler = std::function<void(const HttpRequest&, ResponseWriter&)>;

struct HttpServerOptions {
  std::string host = "0.0.0.0";  // an IPv4/IPv6 literal, or "localhost"
  uint16_t port = 0;             // 0: pick a free port (see HttpServer::port())
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  int64_t header_timeout_ms = 10'000;
  int64_t idle_timeout_ms = 60'000;
  size_t max_connections = 1024;
  // >= max_body_bytes. Bounds what bodies cost (1024 connections x 8 MiB would be 8 GiB): each
  // request's first body_bytes_free_per_request bytes are not charged (bounded by max_connections
  // instead, 64 MiB by default), so big bodies queued or trickling in cannot starve small ones.
  // The handler's own copies (a parsed JSON document, token ids) are beside it, one per body.
  size_t max_buffered_body_bytes = 256u << 20;
  size_t body_bytes_free_per_request = 64u << 10;
};

class HttpServer {
 public:
  // Binds, listens, and starts accepting on a background thread. InvalidArgument for a bad host;
  // Unavailable when the address cannot be bound.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, Handler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  size_t open_connections() const;
  size_t buffered_body_bytes() const;  // charged against max_buffered_body_bytes now
  // Requests read whose handler has not returned, so whose response is not all written yet: what
  // a drain waits for before Stop() (which cuts every connection) as well as its own work.
  int64_t active_requests() const;

  // Stops accepting, shuts every connection down (handlers see ClientGone) and joins all threads.
  // Idempotent and thread-safe. Returns once every handler has returned, so handlers must watch
  // ClientGone()/WriteChunk while they wait. REQUIRES: not called from a handler.
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::agent::http
