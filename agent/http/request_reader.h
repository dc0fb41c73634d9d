#pragma once
// Reads one HTTP/1.1 request from a socket with Beast's parser, enforcing the server's limits.
//
// Timing: the whole head (request line + headers) must arrive by `head_deadline_ms`, however the
// bytes trickle in, so a slow-loris client is cut off at the deadline. Before the first byte the
// reader waits until `first_byte_deadline_ms` (the keep-alive idle limit); the head deadline then
// starts at that first byte unless one was given. Each wait for body bytes is bounded by
// `body_stall_ms`.
//
// Memory: a request's body is reserved against a BodyBudget shared by every connection before the
// parser allocates it (the declared Content-Length at the end of the head; a chunked body as it
// grows), so many clients sending big bodies at once are refused with 429 instead of growing the
// process without bound.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>

#include "agent/http/http_server.h"

namespace tandem::agent::http::internal {

// Bytes of request bodies the server holds, all connections together, against one limit. Each
// request's first `free_bytes` are not charged (a chat request is a few KiB; that part is bounded
// by the connection cap instead), so clients holding big bodies cannot starve small requests.
// Thread-safe.
class BodyBudget {
 public:
  BodyBudget(size_t limit, size_t free_bytes) : limit_(limit), free_bytes_(free_bytes) {}
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;
  // Takes `bytes` if they fit under the limit; false (nothing taken) if not.
  bool TryTake(size_t bytes);
  void Give(size_t bytes) { used_.fetch_sub(bytes); }
  size_t used() const { return used_.load(); }
  size_t limit() const { return limit_; }
  size_t free_bytes() const { return free_bytes_; }

 private:
  const size_t limit_;
  const size_t free_bytes_;
  std::atomic<size_t> used_{0};
};

// One request's share of a BodyBudget: it grows with the body and goes back when the lease is
// destroyed (after the handler, with the request). A null budget lends without limit.
class BodyLease {
 public:
  explicit BodyLease(BodyBudget* budget) : budget_(budget) {}
  ~BodyLease() {
    if (budget_ != nullptr) budget_->Give(charged_);
  }
  BodyLease(const BodyLease&) = delete;
  BodyLease& operator=(const BodyLease&) = delete;
  // Holds at least `bytes` of body in all; false (holding what it held) when the budget cannot
  // lend what that needs beyond the free part.
  bool GrowTo(size_t bytes);
  size_t held() const { return held_; }
  size_t charged() const { return charged_; }  // held() beyond the budget's free part
  const BodyBudget* budget() const { return budget_; }

 private:
  BodyBudget* budget_;
  size_t held_ = 0;
  size_t charged_ = 0;
};

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
  int status = 0;         // kReject: 400, 413, 429 (the body budget is spent) or 431
  std::string message;    // kReject: for the error body
  int retry_after_s = 0;  // kReject: > 0, a Retry-After header (429)
  bool keep_alive = false;
  bool http10 = false;  // HTTP/1.0: no chunked responses
};

// Reads the next request on `fd`. `buffer` carries bytes between calls (pipelined requests).
// `head_deadline_ms` < 0: the head deadline is header_timeout_ms after the first byte.
// Times are NowMs() values. Sends "100 Continue" itself when the client asks for it, after the body
// is reserved in `lease` (which must be fresh; the caller keeps it as long as the request's body).
ReadResult ReadRequest(int fd, const ReadLimits& limits, int64_t first_byte_deadline_ms,
                       int64_t head_deadline_ms, boost::beast::flat_buffer& buffer, BodyLease& lease,
                       HttpRequest* request);

}  // namespace tandem::agent::http::internal
