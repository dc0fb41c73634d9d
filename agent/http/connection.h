#pragma once
// One client connection: reads requests, runs the handler for each, keeps the connection alive
// while both sides allow it. Runs on the connection's own thread and blocks.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/http/http_server.h"

namespace tandem::agent::http::internal {

class BodyBudget;

struct ConnectionContext {
  const HttpServerOptions* options = nullptr;
  BodyBudget* body_budget = nullptr;  // request bodies of all connections; null: no shared limit
  const Handler* handler = nullptr;
  const std::atomic<bool>* stopping = nullptr;  // set by HttpServer::Stop()
  // Requests read whose handler has not returned (their response not all written); null: none kept.
  std::atomic<int64_t>* active = nullptr;
};

// Serves requests on `fd` until the client leaves, a limit or timeout is hit, or the server stops.
// `accepted_ms` (a NowMs() value) starts the first request's header timeout. Does not close `fd`.
// Never throws: a throwing handler is logged and answered 500 when it had not answered.
void ServeConnection(int fd, const std::string& peer, int64_t accepted_ms, const ConnectionContext& context);

// Writes a whole error response (OpenAI error JSON, Connection: close; Retry-After when
// `retry_after_s` > 0) and ends our side of the connection, waiting at most `linger_ms` for the
// client to read it. Does not close `fd`.
void RejectConnection(int fd, int status, std::string_view message, int64_t linger_ms, int retry_after_s = 0);

}  // namespace tandem::agent::http::internal
