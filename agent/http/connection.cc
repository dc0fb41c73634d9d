#include "agent/http/connection.h"

#include <exception>

#include <boost/beast/core/flat_buffer.hpp>

#include "agent/http/request_reader.h"
#include "agent/http/response_writer.h"
#include "agent/http/socket_io.h"
#include "common/logging.h"

namespace tandem::agent::http::internal {
namespace {

// How long a closing connection waits for the client to read its last response.
constexpr int64_t kLingerMs = 200;

// Runs the handler; never lets an exception out.
void RunHandler(const ConnectionContext& context, const HttpRequest& request, SocketResponseWriter& writer) {
  bool threw = false;
  try {
    (*context.handler)(request, writer);
  } catch (const std::exception& e) {
    threw = true;
    TANDEM_LOG(Error) << "HTTP handler for " << request.method << " " << request.path
                      << " threw: " << e.what();
  } catch (...) {
    threw = true;
    TANDEM_LOG(Error) << "HTTP handler for " << request.method << " " << request.path
                      << " threw a non-standard exception";
  }
  if (threw) writer.CloseAfterResponse();
  if (!writer.answered()) {
    if (!threw) {
      TANDEM_LOG(Error) << "HTTP handler for " << request.method << " " << request.path << " did not answer";
    }
    writer.CloseAfterResponse();
    writer.Send(500, "application/json",
                OpenAiErrorJson(500, "internal error: the request was not answered"));
  }
}

}  // namespace

void RejectConnection(int fd, int status, std::string_view message, int64_t linger_ms, int retry_after_s) {
  std::string body = OpenAiErrorJson(status, message);
  SocketResponseWriter writer(fd, /*head_request=*/false, /*keep_alive=*/false, /*http10=*/false, nullptr);
  HeaderList extra;
  if (retry_after_s > 0) extra.emplace_back("Retry-After", std::to_string(retry_after_s));
  writer.Send(status, "application/json", body, extra);
  DrainAndShutdown(fd, linger_ms);
}

void ServeConnection(int fd, const std::string& peer, int64_t accepted_ms, const ConnectionContext& context) {
  const HttpServerOptions& options = *context.options;
  ReadLimits limits;
  limits.max_body_bytes = options.max_body_bytes;
  limits.max_header_bytes = options.max_header_bytes;
  limits.header_timeout_ms = options.header_timeout_ms;
  limits.body_stall_ms = options.idle_timeout_ms;
  boost::beast::flat_buffer buffer;
  bool first = true;
  while (!context.stopping->load()) {
    // A new connection must deliver its first head within the header timeout; a kept-alive one
    // may idle first, and its head timeout starts at the next request's first byte.
    const int64_t head_deadline_ms = first ? accepted_ms + options.header_timeout_ms : -1;
    const int64_t first_byte_deadline_ms = first ? head_deadline_ms : NowMs() + options.idle_timeout_ms;
    first = false;
    BodyLease lease(context.body_budget);  // declared first: given back after the request's body is freed
    HttpRequest request;
    request.peer = peer;
    ReadResult read =
        ReadRequest(fd, limits, first_byte_deadline_ms, head_deadline_ms, buffer, lease, &request);
    if (read.kind == ReadResult::Kind::kClosed) return;
    if (read.kind == ReadResult::Kind::kReject) {
      TANDEM_LOG(Debug) << "rejecting a request from " << peer << " with " << read.status << ": "
                        << read.message;
      RejectConnection(fd, read.status, read.message, kLingerMs, read.retry_after_s);
      return;
    }
    SocketResponseWriter writer(fd, request.method == "HEAD", read.keep_alive, read.http10, context.stopping);
    if (context.active != nullptr) context.active->fetch_add(1);
    RunHandler(context, request, writer);  // never throws
    if (context.active != nullptr) context.active->fetch_sub(1);
    if (!writer.reusable()) {
      DrainAndShutdown(fd, kLingerMs);
      return;
    }
  }
}

}  // namespace tandem::agent::http::internal
