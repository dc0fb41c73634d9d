#pragma once
// A minimal blocking HTTP/1.1 client for agent tests: one request per connection
// (Connection: close), the response read to EOF, chunked bodies decoded.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tandem::agent::testing {

struct HttpResponse {
  int status = 0;  // 0: no answer
  std::string headers;
  std::string body;
};

inline std::string DecodeChunked(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(raw.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (n == 0) break;
    out += raw.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

inline HttpResponse HttpCall(uint16_t port, const std::string& method, const std::string& path,
                             const std::string& body = "",
                             const std::vector<std::pair<std::string, std::string>>& headers = {},
                             int timeout_s = 60) {
  HttpResponse r;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST") {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  (void)send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || head_end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  r.headers = raw.substr(0, head_end);
  r.body = raw.substr(head_end + 4);
  if (r.headers.find("chunked") != std::string::npos) r.body = DecodeChunked(r.body);
  return r;
}

// A streaming (SSE) POST, timed: when the first `data:` event arrived, when the stream ended, and
// the completion_tokens of its usage chunk (0 when there was none).
struct StreamTimes {
  std::chrono::steady_clock::time_point first_event, end;
  int completion_tokens = 0;
};

inline StreamTimes HttpStream(uint16_t port, const std::string& path, const std::string& body) {
  StreamTimes t;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{120, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return t;
  }
  const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                          "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  (void)send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  bool seen = false;
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (!seen && raw.find("data: ") != std::string::npos) {
      seen = true;
      t.first_event = std::chrono::steady_clock::now();
    }
  }
  t.end = std::chrono::steady_clock::now();
  close(fd);
  const size_t usage = raw.rfind("\"completion_tokens\":");
  if (usage != std::string::npos) t.completion_tokens = std::atoi(raw.c_str() + usage + 20);
  return t;
}

}  // namespace tandem::agent::testing
