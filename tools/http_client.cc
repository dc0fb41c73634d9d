#include "tools/http_client.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tandem::tools {
namespace {

using Json = nlohmann::json;

// A blocking TCP connection with a deadline on every read.
class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Status Open(const std::string& host, uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) return Status::Unavailable("resolve " + host + ": " + gai_strerror(rc));
    std::string last = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      fd_ = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd_ < 0) continue;
      if (connect(fd_, a->ai_addr, a->ai_addrlen) == 0) break;
      last = std::strerror(errno);
      close(fd_);
      fd_ = -1;
    }
    freeaddrinfo(found);
    if (fd_ < 0) return Status::Unavailable("connect " + host + ":" + std::to_string(port) + ": " + last);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return Status::Ok();
  }
  Status Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return Status::Unavailable(std::string("send: ") + std::strerror(errno));
      sent += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  // Appends what arrives to *buf; 0 bytes at the peer's close. DeadlineExceeded past `deadline`.
  StatusOr<size_t> Read(std::string* buf, HttpClock::time_point deadline) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - HttpClock::now()).count();
      if (left <= 0) return Status::DeadlineExceeded("no answer within the request timeout");
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (ready < 0 && errno != EINTR)
        return Status::Unavailable(std::string("poll: ") + std::strerror(errno));
      if (ready <= 0) continue;
      char chunk[16384];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::Unavailable(std::string("recv: ") + std::strerror(errno));
      }
      buf->append(chunk, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
  }

 private:
  int fd_ = -1;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An HTTP/1.1 response read incrementally: the head, then the body de-chunked (or by length, or
// to the close), handed to `on_body` as it arrives with the time it arrived.
class ResponseReader {
 public:
  template <typename OnBody>
  Status Read(Connection* conn, HttpClock::time_point deadline, OnBody on_body) {
    std::string raw;
    size_t head_end = std::string::npos;
    while ((head_end = raw.find("\r\n\r\n")) == std::string::npos) {
      ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
      if (n == 0) return Status::Unavailable("the server closed the connection before answering");
      if (raw.size() > (1 << 20)) return Status::InvalidArgument("response head over 1 MiB");
    }
    const std::string head = raw.substr(0, head_end);
    raw.erase(0, head_end + 4);
    if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) {
      return Status::InvalidArgument("not an HTTP response: " + head.substr(0, 40));
    }
    status_ = std::atoi(head.c_str() + 9);
    const std::string lower = Lower(head);
    const bool chunked = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
    int64_t length = -1;
    if (const size_t at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
      length = std::atoll(head.c_str() + at + 17);
    }
    if (!chunked) {
      int64_t got = 0;
      for (;;) {
        if (!raw.empty()) {
          got += static_cast<int64_t>(raw.size());
          on_body(status_, raw);
          raw.clear();
        }
        if (length >= 0 && got >= length) return Status::Ok();
        ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
        if (n == 0) {
          return length < 0 ? Status::Ok() : Status::Unavailable("the body ended before its Content-Length");
        }
      }
    }
    // Chunked: SIZE\r\nDATA\r\n ... 0\r\n\r\n.
    for (;;) {
      size_t line_end;
      while ((line_end = raw.find("\r\n")) == std::string::npos) {
        ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
        if (n == 0) return Status::Unavailable("the stream ended inside a chunk header");
      }
      const size_t size = std::strtoull(raw.c_str(), nullptr, 16);
      raw.erase(0, line_end + 2);
      if (size == 0) return Status::Ok();
      while (raw.size() < size + 2) {
        ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
        if (n == 0) return Status::Unavailable("the stream ended inside a chunk");
      }
      on_body(status_, raw.substr(0, size));
      raw.erase(0, size + 2);
    }
  }
  int status() const { return status_; }

 private:
  int status_ = 0;
};

std::string Request(const Endpoint& e, const std::string& method, const std::string& path,
                    const std::string& body) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: " + e.host + ":" + std::to_string(e.port) +
                  "\r\nConnection: close\r\nAccept: text/event-stream, application/json\r\n";
  if (!e.api_key.empty()) r += "Authorization: Bearer " + e.api_key + "\r\n";
  if (method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

}  // namespace

std::string Endpoint::ApiPath(std::string_view api) const {
  const bool has_v1 = prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0;
  return prefix + (has_v1 ? "" : "/v1") + "/" + std::string(api);
}

StatusOr<Endpoint> ParseEndpoint(const std::string& url, const std::string& api_key) {
  if (url.rfind("https://", 0) == 0) {
    return Status::InvalidArgument("--url " + url +
                                   ": https is not supported by the built-in client (use http, e.g. through "
                                   "kubectl port-forward, or run aiperf: docs/performance.md)");
  }
  if (url.rfind("http://", 0) != 0)
    return Status::InvalidArgument("--url " + url + ": want http://HOST:PORT[/PATH]");
  Endpoint e;
  e.api_key = api_key;
  std::string rest = url.substr(7);
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    e.prefix = rest.substr(slash);
    rest.erase(slash);
    while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.back() == ']') {
    e.host = rest;
    e.port = 80;
  } else {
    e.host = rest.substr(0, colon);
    char* end = nullptr;
    const long p = std::strtol(rest.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || p < 1 || p > 65535) return Status::InvalidArgument("--url " + url + ": bad port");
    e.port = static_cast<uint16_t>(p);
  }
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']')
    e.host = e.host.substr(1, e.host.size() - 2);
  if (e.host.empty()) return Status::InvalidArgument("--url " + url + ": no host");
  return e;
}

StatusOr<int> HttpExchange(const Endpoint& endpoint, const std::string& method, const std::string& path,
                           const std::string& body, HttpClock::time_point deadline, const BodySink& on_body) {
  Connection conn;
  RETURN_IF_ERROR(conn.Open(endpoint.host, endpoint.port));
  RETURN_IF_ERROR(conn.Send(Request(endpoint, method, path, body)));
  ResponseReader reader;
  RETURN_IF_ERROR(reader.Read(&conn, deadline, on_body));
  return reader.status();
}

StatusOr<HttpAnswer> HttpCall(const Endpoint& endpoint, const std::string& method, const std::string& path,
                              const std::string& body, std::chrono::milliseconds timeout,
                              size_t max_body_bytes) {
  HttpAnswer answer;
  bool over = false;
  ASSIGN_OR_RETURN(answer.status, HttpExchange(endpoint, method, path, body, HttpClock::now() + timeout,
                                               [&](int, const std::string& bytes) {
                                                 if (answer.body.size() + bytes.size() > max_body_bytes) {
                                                   over = true;
                                                 } else {
                                                   answer.body += bytes;
                                                 }
                                               }));
  if (over) {
    return Status::InvalidArgument(method + " " + path + ": answer over " + std::to_string(max_body_bytes) +
                                   " bytes");
  }
  return answer;
}

StatusOr<std::string> FirstModel(const Endpoint& endpoint) {
  ASSIGN_OR_RETURN(const HttpAnswer answer,
                   HttpCall(endpoint, "GET", endpoint.ModelsPath(), "", std::chrono::seconds(30), 1 << 20));
  if (answer.status != 200) {
    return Status::Unavailable("GET " + endpoint.ModelsPath() + ": HTTP " + std::to_string(answer.status) +
                               ": " + answer.body.substr(0, 256));
  }
  const Json j = Json::parse(answer.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return Status::InvalidArgument("GET " + endpoint.ModelsPath() +
                                   ": no model in the answer (use --model-name)");
  }
  return j["data"][0]["id"].get<std::string>();
}

}  // namespace tandem::tools
