#pragma once
// The plain-HTTP/1.1 client the `tandem` tools use against OpenAI-compatible servers (`bench
// serve`, `eval tools`): one connection per exchange, a deadline on every read, the body handed
// over as it arrives (de-chunked), so a caller can time server-sent events. No TLS (users reach a
// deployment through `kubectl port-forward`).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::tools {

// http://HOST:PORT[/PREFIX]; a trailing /v1 is part of the prefix or not, as the user wrote it.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string prefix;  // "" or "/v1" or "/some/path/v1"
  std::string api_key;
  // PREFIX/v1/<api> with exactly one /v1: ApiPath("completions"), "chat/completions", "models".
  std::string ApiPath(std::string_view api) const;
  std::string CompletionsPath() const { return ApiPath("completions"); }
  std::string ModelsPath() const { return ApiPath("models"); }
};
// Errors: InvalidArgument for https, another scheme, a bad port or no host (the message names `url`).
StatusOr<Endpoint> ParseEndpoint(const std::string& url, const std::string& api_key);

using HttpClock = std::chrono::steady_clock;

// Sends `method path` with `body` (JSON when POST) and the endpoint's bearer key, then reads the
// answer until it ends or `deadline`: `on_body(status, bytes)` gets each piece of the body as it
// arrives. Returns the HTTP status. Errors: Unavailable (connect, send, a connection that ends
// early), DeadlineExceeded, InvalidArgument (not an HTTP answer, a head over 1 MiB).
using BodySink = std::function<void(int status, const std::string& bytes)>;
StatusOr<int> HttpExchange(const Endpoint& endpoint, const std::string& method, const std::string& path,
                           const std::string& body, HttpClock::time_point deadline, const BodySink& on_body);

// A whole answer: the status and up to `max_body_bytes` of the body (more is an InvalidArgument).
struct HttpAnswer {
  int status = 0;
  std::string body;
};
StatusOr<HttpAnswer> HttpCall(const Endpoint& endpoint, const std::string& method, const std::string& path,
                              const std::string& body, std::chrono::milliseconds timeout,
                              size_t max_body_bytes = size_t{16} << 20);

// The served model's id: GET /v1/models, the first entry.
StatusOr<std::string> FirstModel(const Endpoint& endpoint);

}  // namespace tandem::tools
