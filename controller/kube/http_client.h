#pragma once
// HTTP/1.1 client for one API server: TCP or TLS (1.2+, server verified against a CA, SNI, client
// certificates), keep-alive connections reused through a small pool, a deadline on every request,
// chunked bodies, and a streaming mode that hands each newline-delimited line to a callback as it
// arrives (watch). Boost.Beast stays inside http_client.cc.
//
// Thread-safe: concurrent Do()/Stream() calls each take their own connection.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "controller/kube/cancel.h"

namespace tandem::controller::kube {

struct HttpClientOptions {
  std::string server;  // "https://host:port" or "http://host:port" (path must be empty or "/")
  std::string ca_pem;  // https: trusted CAs; empty: the system default paths
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // name verified and sent as SNI; empty: the host
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string user_agent = "tandem-controller";
  int64_t connect_timeout_ms = 10'000;
  int64_t request_timeout_ms = 30'000;
  int max_idle_connections = 8;
  // Do(): a response body longer than this is an error (InvalidArgument) and the rest is not read;
  // a caller that parses small answers (a pod's /metrics, a Prometheus query) sets its own cap.
  uint64_t max_body_bytes = 256ull << 20;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path plus query: "/api/v1/pods?limit=5"
  std::string body;
  std::string content_type;  // sent when non-empty
  std::string bearer_token;  // "Authorization: Bearer ..." when non-empty
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timeout_ms = 0;  // whole request; 0: HttpClientOptions::request_timeout_ms
  CancelToken* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;  // empty for a successful Stream()
};

// Called with each line (without "\n"); return false to stop reading.
using LineCallback = std::function<bool(std::string_view line)>;

// Transport errors: Unavailable (connect/TLS/read/write failure, the peer closed), DeadlineExceeded
// (the request's deadline passed), Cancelled (the request's CancelToken fired), InvalidArgument
// (a malformed response).
class HttpClient {
 public:
  // InvalidArgument on a bad server URL or unusable TLS material.
  static StatusOr<std::unique_ptr<HttpClient>> New(HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One request, whole body read. Any HTTP status is a successful result. A pooled connection
  // that turns out to be closed is replaced and the request re-sent once when nothing was read.
  StatusOr<HttpResponse> Do(const HttpRequest& request);

  // Sends `request` on a fresh connection. On a 2xx status the body is delivered line by line to
  // `on_line` as it arrives and the returned response has an empty body; otherwise the whole body
  // is read and returned like Do(). Returns when the body ends (OK), on_line returns false (OK),
  // or with a transport error (Unavailable when the stream breaks mid-body). Only the
  // request's timeout_ms bounds a stream (0: no deadline while data flows).
  StatusOr<HttpResponse> Stream(const HttpRequest& request, const LineCallback& on_line);

  // Connections opened so far (tests of keep-alive reuse).
  uint64_t connections_opened() const;

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::controller::kube
