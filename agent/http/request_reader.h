#pragma once
// Reads one HTTP/1.1 request from a socket with Beast's parser, enforcing the server's limits.
//
// Timing: the whole head (request line + headers) must arrive by `head_deadline_ms`, however the
// bytes trickle in, so a slow-loris client is cut off at the deadline. Before the first byte the
// reader waits until `first_byte_deadline_ms` (the keep-alive idle limit); the head deadline then
// starts at that first byte unless one was given. Each wait for body bytes is bounded by
// `body_stall_ms`.

#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>

#include "agent/http/http_server.h"

namespace tandem::agent::http::internal {

struct ReadLimits {
  size_t max_body_bytes = 0;
  size_t max_header_bytes = 0;
  int64_t header_timeout_ms = 0;
  int64_t body_stall_ms = 0;
};

struct ReadResult {
  enum class Kind {
    kRequest,  // `request` is filled in
    kClosed,   // EOF, a timeout or a socket error: close without answering
    kReject,   // answer `status` with `message` (OpenAI error shape), then close
  };
  Kind kind = Kind::kClosed;
  int status = 0;       // kReject: 400, 413 or 431
  std::string message;  // kReject: for the error body
  bool keep_alive = false;
  bool http10 = false;  // HTTP/1.0: no chunked responses
};

// Reads the next request on `fd`. `buffer` carries bytes between calls (pipelined requests).
// `head_deadline_ms` < 0: the head deadline is header_timeout_ms after the first byte.
// Times are NowMs() values. Sends "100 Continue" itself when the client asks for it.
ReadResult ReadRequest(int fd, const ReadLimits& limits, int64_t first_byte_deadline_ms,
                       int64_t head_deadline_ms, boost::beast::flat_buffer& buffer, HttpRequest* request);

}  // namespace tandem::agent::http::internal
