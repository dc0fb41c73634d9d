// Routing and address parsing for controller/metrics/server.h: no sockets here, so the
// behaviour of each path is testable without a connection.
#include <charconv>

#include "controller/metrics/controller_metrics.h"
#include "controller/metrics/server.h"

namespace tandem::controller::metrics {
namespace {

constexpr std::string_view kExpositionType = "text/plain; version=0.0.4; charset=utf-8";

bool IsIpv4(std::string_view host) {
  int parts = 0;
  size_t start = 0;
  while (start <= host.size()) {
    size_t end = host.find('.', start);
    if (end == std::string_view::npos) end = host.size();
    std::string_view part = host.substr(start, end - start);
    int value = -1;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || part.size() > 3 || ec != std::errc() || p != part.data() + part.size() ||
        value > 255) {
      return false;
    }
    ++parts;
    start = end + 1;
  }
  return parts == 4;
}

Response Readiness(const ServerOptions& options, bool verbose) {
  std::string lines;
  bool ready = true;
  for (const ReadinessCheck& c : options.readiness_checks) {
    Status s = c.check ? c.check() : Status::Internal("no check function");
    if (s.ok()) {
      lines += "[+]" + c.name + " ok\n";
    } else {
      ready = false;
      lines += "[-]" + c.name + " failed: " + s.message() + "\n";
    }
  }
  if (ready) return {200, "text/plain; charset=utf-8", verbose ? lines + "readyz check passed\n" : "ok"};
  return {503, "text/plain; charset=utf-8", lines + "readyz check failed\n"};
}

}  // namespace

StatusOr<BindAddress> ParseBindAddress(std::string_view address) {
  const std::string quoted = "bind address \"" + std::string(address) + "\"";
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return Status::InvalidArgument(quoted + ": want host:port or :port");
  }
  std::string_view host = address.substr(0, colon);
  std::string_view port_text = address.substr(colon + 1);
  unsigned port = 0;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || p != port_text.data() + port_text.size() || port > 65535) {
    return Status::InvalidArgument(quoted + ": port must be a number in 0..65535");
  }
  BindAddress out;
  out.port = static_cast<uint16_t>(port);
  if (host.empty()) {
    out.host = "0.0.0.0";
  } else if (host == "localhost") {
    out.host = "127.0.0.1";
  } else if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    out.host = std::string(host.substr(1, host.size() - 2));
    if (out.host.find(':') == std::string::npos) {
      return Status::InvalidArgument(quoted + ": brackets hold an IPv6 address");
    }
  } else if (IsIpv4(host)) {
    out.host = std::string(host);
  } else {
    return Status::InvalidArgument(quoted + ": host must be an IP address, [IPv6] or localhost");
  }
  return out;
}

Response Handle(const ServerOptions& options, std::string_view method, std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view query = path.size() < target.size() ? target.substr(path.size() + 1) : std::string_view();
  const bool known = (path == "/metrics" && options.metrics != nullptr) ||
                     (options.serve_health && (path == "/healthz" || path == "/readyz"));
  if (!known) return {404, "text/plain; charset=utf-8", "404 page not found\n"};
  if (method != "GET" && method != "HEAD") {
    return {405, "text/plain; charset=utf-8", "method not allowed: use GET\n"};
  }
  if (path == "/metrics") return {200, std::string(kExpositionType), options.metrics->Serialize()};
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok"};
  const bool verbose =
      query == "verbose" || query.starts_with("verbose=") || query.find("&verbose") != std::string_view::npos;
  return Readiness(options, verbose);
}

}  // namespace tandem::controller::metrics
