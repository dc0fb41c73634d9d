#pragma once
// Test helpers for the HTTP server: a raw POSIX-socket client that sees exactly the bytes on the
// wire, and a one-shot Notification. Every wait is bounded.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tandem::agent::http::testing {

class RawClient {
 public:
  // Connects to 127.0.0.1:port; connected() is false on failure.
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Close();
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  const std::string& received() const { return received_; }
  bool eof() const { return eof_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads for at most `timeout_ms` more; false on timeout. Sets eof() on EOF or a reset.
  bool ReadSome(int timeout_ms) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    char buffer[4096];
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      eof_ = true;
    } else {
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until `done(received())` or EOF; false when `timeout_ms` passes first.
  bool ReadUntil(const std::function<bool(const std::string&)>& done, int timeout_ms = 2000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done(received_) && !eof_) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadSome(static_cast<int>(left.count()))) return false;
    }
    return true;
  }

  bool ReadToEof(int timeout_ms = 2000) {
    return ReadUntil([](const std::string&) { return false; }, timeout_ms) && eof_;
  }

  // Reads one response framed by Content-Length and removes it from received(); the whole raw
  // response (head and body) goes to `out`. False on a timeout or an early EOF.
  bool ReadResponse(std::string* out, int timeout_ms = 2000) {
    size_t total = 0;
    bool ok = ReadUntil(
        [&](const std::string& bytes) {
          size_t head_end = bytes.find("\r\n\r\n");
          if (head_end == std::string::npos) return false;
          size_t length_at = bytes.find("Content-Length: ");
          if (length_at == std::string::npos || length_at > head_end) return false;
          total = head_end + 4 + std::strtoul(bytes.c_str() + length_at + 16, nullptr, 10);
          return bytes.size() >= total;
        },
        timeout_ms);
    if (!ok || total == 0 || received_.size() < total) return false;
    *out = received_.substr(0, total);
    received_.erase(0, total);
    return true;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string received_;
  bool eof_ = false;
};

// The status code of a raw response ("HTTP/1.1 200 OK..." gives 200), or -1.
inline int StatusOf(std::string_view response) {
  if (response.size() < 12 || response.substr(0, 5) != "HTTP/") return -1;
  return std::atoi(std::string(response.substr(9, 3)).c_str());
}

// What follows the head of a raw response.
inline std::string BodyOf(std::string_view response) {
  size_t head_end = response.find("\r\n\r\n");
  return head_end == std::string_view::npos ? std::string() : std::string(response.substr(head_end + 4));
}

class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool WaitFor(int timeout_ms = 2000) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return notified_; });
  }
  bool notified() {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

// Polls `condition` every millisecond for at most `timeout_ms`.
inline bool WaitUntil(const std::function<bool()>& condition, int timeout_ms = 2000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ::poll(nullptr, 0, 1);
  }
  return true;
}

}  // namespace tandem::agent::http::testing
