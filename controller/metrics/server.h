#pragma once
// The controller's HTTP endpoints for Prometheus and the kubelet, on Boost.Beast:
//   GET /metrics  the ControllerMetrics exposition (text/plain; version=0.0.4)
//   GET /healthz  200 "ok" while the process serves HTTP (liveness)
//   GET /readyz   200 "ok" when every readiness check passes, else 503 listing them
//                 (`[+]informers-synced ok`, `[-]leader-election failed: ...`); `?verbose`
//                 lists them on success too
// HEAD works like GET without a body; other methods get 405, other paths 404, malformed
// requests 400. One background thread serves every connection (HTTP/1.1 keep-alive, a 10 s idle
// timeout per read and write), so a stalled client cannot hold the probes up for long.
//
// The controller runs one server on --metrics-bind-address (metrics) and one on
// --health-probe-bind-address (health checks), or a single one when the two are equal.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem::controller::metrics {

class ControllerMetrics;

// A named readiness check: OK when ready, else an error whose message says why.
struct ReadinessCheck {
  std::string name;  // e.g. "informers-synced", "leader-election"
  std::function<Status()> check;
};

struct ServerOptions {
  // "host:port", ":port" (all IPv4 interfaces, controller-runtime's form), "[v6addr]:port",
  // "localhost:port". Port 0 picks a free port (see Server::port()). controller-runtime's "0"
  // (serve nothing) is the caller's to handle: it is not an address here.
  std::string bind_address = ":8080";
  // Serves /metrics when set. Not owned; must outlive the server.
  const ControllerMetrics* metrics = nullptr;
  // Serves /healthz and /readyz when true.
  bool serve_health = true;
  // /readyz checks, run in order on each request (on the server thread: keep them quick and
  // thread-safe). No checks: always ready.
  std::vector<ReadinessCheck> readiness_checks;
};

// An address to bind: an IP literal and a port.
struct BindAddress {
  std::string host;  // an IPv4 or IPv6 literal
  uint16_t port = 0;
};

// Parses ServerOptions::bind_address. InvalidArgument for anything else (no port, port > 65535,
// a host name other than localhost).
StatusOr<BindAddress> ParseBindAddress(std::string_view address);

class Server {
 public:
  // Binds, listens and starts serving on a background thread. InvalidArgument for a bad address
  // or options that serve nothing; Unavailable when the address cannot be bound (in use, not
  // local).
  static StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);

  // Stops (see Stop()).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port (the chosen one when the options said 0).
  uint16_t port() const;
  // "host:port" as bound, e.g. "127.0.0.1:40123".
  std::string address() const;

  // Closes the listener and every connection and joins the thread. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The response to one request; exposed for tests. `target` is the request target (path and
// optional query).
struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
Response Handle(const ServerOptions& options, std::string_view method, std::string_view target);

}  // namespace tandem::controller::metrics
