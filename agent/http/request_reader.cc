#include "agent/http/request_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <utility>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "agent/http/socket_io.h"
#include "common/logging.h"

namespace tandem::agent::http::internal {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Parser = bhttp::request_parser<bhttp::string_body>;

constexpr size_t kReadChunkBytes = 16 << 10;
constexpr int64_t kContinueSendTimeoutMs = 5'000;

std::string_view Std(beast::string_view s) { return {s.data(), s.size()}; }

ReadResult Closed() { return ReadResult{}; }

ReadResult Reject(int status, std::string message) {
  ReadResult result;
  result.kind = ReadResult::Kind::kReject;
  result.status = status;
  result.message = std::move(message);
  return result;
}

ReadResult RefuseForBudget(const BodyLease& lease, size_t wanted) {
  const BodyBudget& budget = *lease.budget();
  const size_t more = wanted - std::max(budget.free_bytes(), lease.held());
  ReadResult result =
      Reject(429, "the server holds " + std::to_string(budget.used()) +
                      " bytes of request bodies and cannot take " + std::to_string(more) +
                      " more under its limit of " + std::to_string(budget.limit()) + "; retry later");
  result.retry_after_s = 1;
  return result;
}

ReadResult RejectForParseError(const beast::error_code& ec, const Parser& parser, const ReadLimits& limits) {
  if (ec == bhttp::error::body_limit) {
    // The parser stops at the header when Content-Length is over the limit; the field is stored.
    std::string_view length = Std(parser.get()[bhttp::field::content_length]);
    uint64_t bytes = 0;
    auto [end, err] = std::from_chars(length.data(), length.data() + length.size(), bytes);
    if (!length.empty() && err == std::errc() && end == length.data() + length.size()) {
      return Reject(413, "request body is " + std::to_string(bytes) + " bytes, over the limit of " +
                             std::to_string(limits.max_body_bytes));
    }
    return Reject(413,
                  "request body is over the limit of " + std::to_string(limits.max_body_bytes) + " bytes");
  }
  if (ec == bhttp::error::header_limit) {
    return Reject(
        431, "request header is over the limit of " + std::to_string(limits.max_header_bytes) + " bytes");
  }
  return Reject(400, "malformed HTTP request: " + ec.message());
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

void FillRequest(Parser& parser, HttpRequest* request) {
  bhttp::request<bhttp::string_body>& message = parser.get();
  request->method = std::string(Std(message.method_string()));
  request->target = std::string(Std(message.target()));
  size_t question = request->target.find('?');
  request->path = request->target.substr(0, question);
  request->query = question == std::string::npos ? std::string() : request->target.substr(question + 1);
  request->headers.clear();
  for (const auto& field : message) {
    std::string name = Lower(Std(field.name_string()));
    auto same = std::find_if(request->headers.begin(), request->headers.end(),
                             [&](const auto& header) { return header.first == name; });
    if (same != request->headers.end()) {
      same->second += ", ";
      same->second += Std(field.value());
    } else {
      request->headers.emplace_back(std::move(name), std::string(Std(field.value())));
    }
  }
  request->body = std::move(message.body());
}

bool ExpectsContinue(const Parser& parser) {
  return beast::iequals(parser.get()[bhttp::field::expect], "100-continue");
}

// The heap bytes the parser's body holds or is about to: the declared length before the body is
// allocated (string_body reserves it), then what the string really took.
size_t BodyBytes(const Parser& parser) {
  size_t bytes = parser.get().body().capacity();
  if (bytes <= std::string().capacity()) bytes = 0;  // held inside the string: no heap of its own
  if (boost::optional<uint64_t> length = parser.content_length()) {
    bytes = std::max<size_t>(bytes, static_cast<size_t>(*length));
  }
  return bytes;
}

}  // namespace

bool BodyBudget::TryTake(size_t bytes) {
  size_t used = used_.load();
  do {
    if (bytes > limit_ || used > limit_ - bytes) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return true;
}

bool BodyLease::GrowTo(size_t bytes) {
  if (bytes <= held_) return true;
  if (budget_ != nullptr) {
    const size_t charge = bytes > budget_->free_bytes() ? bytes - budget_->free_bytes() : 0;
    if (charge > charged_ && !budget_->TryTake(charge - charged_)) return false;
    charged_ = std::max(charged_, charge);
  }
  held_ = bytes;
  return true;
}

ReadResult ReadRequest(int fd, const ReadLimits& limits, int64_t first_byte_deadline_ms,
                       int64_t head_deadline_ms, beast::flat_buffer& buffer, BodyLease& lease,
                       HttpRequest* request) {
  Parser parser;
  parser.header_limit(static_cast<uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser.body_limit(limits.max_body_bytes);
  // Not eager until the head is parsed: put() stops there, so the body is reserved in the budget
  // before the parser allocates it.
  parser.eager(false);
  bool got_byte = buffer.size() > 0;
  if (got_byte && head_deadline_ms < 0) head_deadline_ms = NowMs() + limits.header_timeout_ms;
  bool sent_continue = false;
  for (;;) {
    beast::error_code ec;
    while (buffer.size() > 0 && !parser.is_done()) {
      size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec && ec != bhttp::error::need_more) return RejectForParseError(ec, parser, limits);
      if (parser.is_header_done()) {
        parser.eager(true);
        const size_t wanted = BodyBytes(parser);
        if (!lease.GrowTo(wanted)) return RefuseForBudget(lease, wanted);
      }
      if (ec == bhttp::error::need_more || used == 0) break;
    }
    if (parser.is_done()) break;
    if (parser.is_header_done() && !sent_continue && ExpectsContinue(parser)) {
      sent_continue = true;
      if (!SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n", kContinueSendTimeoutMs)) return Closed();
    }
    int64_t deadline_ms;
    if (!got_byte) {
      deadline_ms =
          head_deadline_ms < 0 ? first_byte_deadline_ms : std::min(first_byte_deadline_ms, head_deadline_ms);
    } else if (!parser.is_header_done()) {
      deadline_ms = head_deadline_ms;
    } else {
      deadline_ms = NowMs() + limits.body_stall_ms;
    }
    WaitResult waited = WaitReadable(fd, std::max<int64_t>(0, deadline_ms - NowMs()));
    if (waited == WaitResult::kTimeout && got_byte) {
      TANDEM_LOG(Debug) << "closing a connection whose request did not arrive in time";
    }
    if (waited != WaitResult::kReady) return Closed();
    auto space = buffer.prepare(kReadChunkBytes);
    int64_t received = RecvSome(fd, static_cast<char*>(space.data()), space.size());
    if (received <= 0) return Closed();  // EOF mid-request or before one: nothing to answer
    buffer.commit(static_cast<size_t>(received));
    if (!got_byte) {
      got_byte = true;
      if (head_deadline_ms < 0) head_deadline_ms = NowMs() + limits.header_timeout_ms;
    }
  }
  FillRequest(parser, request);
  ReadResult result;
  result.kind = ReadResult::Kind::kRequest;
  result.keep_alive = parser.keep_alive();
  result.http10 = parser.get().version() < 11;
  return result;
}

}  // namespace tandem::agent::http::internal
