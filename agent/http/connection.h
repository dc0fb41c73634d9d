#pragma once
// One client connection: reads requests, runs the handler for each, keeps the connection alive
// while both sides allow it. Runs on the connection's own thread and blocks.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/http/http_server.h"

namespace tandem::agent::http::internal {

struct ConnectionContext {
  const HttpServerOptions* options = nullptr;
  const Handler* handler = nullptr;
  const std::atomic<bool>* stopping = nullptr;  // set by HttpServer::Stop()
};

// Serves requests on `fd` until the client leaves, a limit or timeout is hit, or the server stops.
// `accepted_ms` (a NowMs() value) starts the first request's header timeout. Does not close `fd`.
// Never throws: a throwing handler is logged and answered 500 when it had not answered.
void ServeConnection(int fd, const std::string& peer, int64_t accepted_ms, const ConnectionContext& context);

// Writes a whole error response (OpenAI error JSON, Connection: close) and ends our side of the
// connection, waiting at most `linger_ms` for the client to read it. Does not close `fd`.
void RejectConnection(int fd, int status, std::string_view message, int64_t linger_ms);

}  // namespace tandem::agent::http::internal
