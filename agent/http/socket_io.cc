#include "agent/http/socket_io.h"

#include <cerrno>
#include <chrono>

#include <poll.h>
#include <sys/socket.h>

namespace tandem::agent::http::internal {
namespace {

// poll() with the timeout clipped to int and EINTR retried against the original deadline.
int PollOne(int fd, short events, int64_t timeout_ms, short* revents) {
  const int64_t deadline_ms = timeout_ms < 0 ? -1 : NowMs() + timeout_ms;
  for (;;) {
    int64_t wait_ms = -1;
    if (deadline_ms >= 0) {
      wait_ms = deadline_ms - NowMs();
      if (wait_ms < 0) wait_ms = 0;
      if (wait_ms > 1'000'000'000) wait_ms = 1'000'000'000;
    }
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(wait_ms));
    if (rc < 0 && errno == EINTR) continue;
    *revents = rc > 0 ? pfd.revents : 0;
    return rc;
  }
}

}  // namespace

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

WaitResult WaitReadable(int fd, int64_t timeout_ms) {
  short revents = 0;
  int rc = PollOne(fd, POLLIN, timeout_ms, &revents);
  if (rc < 0) return WaitResult::kError;
  if (rc == 0) return WaitResult::kTimeout;
  return WaitResult::kReady;  // POLLIN, POLLHUP or POLLERR: the next recv tells which
}

int64_t RecvSome(int fd, char* out, size_t size) {
  for (;;) {
    ssize_t n = ::recv(fd, out, size, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return -1;  // EAGAIN included: poll said readable, so nothing arriving means trouble
  }
}

bool SendAll(int fd, std::string_view data, int64_t timeout_ms) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    short revents = 0;
    int rc = PollOne(fd, POLLOUT, timeout_ms, &revents);
    if (rc <= 0 || (revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return false;
  }
  return true;
}

bool PeerGone(int fd) {
  short revents = 0;
  int rc = PollOne(fd, POLLIN | POLLRDHUP, 0, &revents);
  if (rc < 0) return true;
  if (rc == 0) return false;
  if ((revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  if ((revents & POLLIN) == 0) return false;
  char byte;
  for (;;) {
    ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;  // request bytes waiting, the client is still there
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

void DrainAndShutdown(int fd, int64_t linger_ms) {
  constexpr size_t kMaxDrainBytes = 1 << 20;  // a client still uploading is not waited for
  ::shutdown(fd, SHUT_WR);
  const int64_t deadline_ms = NowMs() + linger_ms;
  char scratch[4096];
  size_t drained = 0;
  while (drained < kMaxDrainBytes) {
    int64_t left_ms = deadline_ms - NowMs();
    if (WaitReadable(fd, left_ms > 0 ? left_ms : 0) != WaitResult::kReady) break;
    int64_t n = RecvSome(fd, scratch, sizeof(scratch));
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

}  // namespace tandem::agent::http::internal
