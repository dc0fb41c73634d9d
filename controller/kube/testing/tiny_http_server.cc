#include "controller/kube/testing/tiny_http_server.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tandem::controller::kube::testing {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 500: return "Internal Server Error";
    default: return "Status";
  }
}

}  // namespace

bool TinyConnection::Write(std::string_view data) {
  while (!data.empty() && !closed_) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return !closed_;
}

bool TinyConnection::Respond(int status, std::string_view body, std::string_view extra_headers) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                     "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n" + std::string(extra_headers) + "\r\n";
  return Write(head + std::string(body));  // one write: no Nagle/delayed-ACK stall
}

bool TinyConnection::StartChunked(int status) {
  return Write("HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
               "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
}

bool TinyConnection::WriteChunk(std::string_view data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return Write(std::string(size) + std::string(data) + "\r\n");
}

bool TinyConnection::EndChunks() { return Write("0\r\n\r\n"); }

void TinyConnection::Close() {
  if (closed_) return;
  ::shutdown(fd_, SHUT_RDWR);
  closed_ = true;
}

TinyHttpServer::TinyHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    std::perror("TinyHttpServer: bind/listen");
    std::abort();  // test fixture: cannot continue without a socket
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

TinyHttpServer::~TinyHttpServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  stop_cv_.notify_all();
  ::shutdown(listen_fd_, SHUT_RDWR);
  accept_thread_.join();
  ::close(listen_fd_);
  for (std::thread& t : threads_) t.join();
}

void TinyHttpServer::WaitForStop() {
  std::unique_lock<std::mutex> lock(mu_);
  stop_cv_.wait(lock, [this] { return stopping_; });
}

void TinyHttpServer::DropConnections() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
}

void TinyHttpServer::AcceptLoop() {
  for (;;) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    accepted_.fetch_add(1);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    client_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TinyHttpServer::Serve(int fd) {
  std::string in;
  TinyConnection conn(fd);
  char buf[4096];
  while (!conn.closed()) {
    size_t header_end;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) goto done;
      in.append(buf, static_cast<size_t>(n));
    }
    {
      TinyRequest request;
      const std::string head = in.substr(0, header_end);
      in.erase(0, header_end + 4);
      size_t line_end = head.find("\r\n");
      const std::string first = head.substr(0, line_end);
      const size_t sp1 = first.find(' ');
      const size_t sp2 = first.find(' ', sp1 + 1);
      request.method = first.substr(0, sp1);
      request.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
      while (line_end != std::string::npos && line_end < head.size()) {
        const size_t next = head.find("\r\n", line_end + 2);
        const std::string line =
            head.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
        const size_t colon = line.find(':');
        if (colon != std::string::npos) {
          std::string value = line.substr(colon + 1);
          value.erase(0, value.find_first_not_of(' '));
          request.headers[Lower(line.substr(0, colon))] = value;
        }
        line_end = next;
      }
      const size_t length =
          request.headers.count("content-length") ? std::stoul(request.headers["content-length"]) : 0;
      while (in.size() < length) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) goto done;
        in.append(buf, static_cast<size_t>(n));
      }
      request.body = in.substr(0, length);
      in.erase(0, length);
      requests_.fetch_add(1);
      handler_(request, conn);
    }
  }
done:
  ::shutdown(fd, SHUT_RDWR);
  std::lock_guard<std::mutex> lock(mu_);
  client_fds_.erase(std::remove(client_fds_.begin(), client_fds_.end(), fd), client_fds_.end());
  ::close(fd);
}

}  // namespace tandem::controller::kube::testing
