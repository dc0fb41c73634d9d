#pragma once
// Blocking I/O on a connected socket's native descriptor, every wait bounded by poll().
//
// Asio's blocking socket calls turn SO_RCVTIMEO/SO_SNDTIMEO back into an unbounded poll, so the
// server reads and writes the descriptor itself and keeps Asio for owning it (and for the acceptor).
// None of these close the descriptor; all are safe against EINTR and never raise SIGPIPE.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem::agent::http::internal {

enum class WaitResult { kReady, kTimeout, kError };

// Waits until `fd` is readable (data, EOF or an error to collect) or `timeout_ms` passes.
// A negative timeout waits without limit.
WaitResult WaitReadable(int fd, int64_t timeout_ms);

// Reads what is available into `out` (up to `size` bytes). REQUIRES: WaitReadable said kReady.
// Returns the byte count, 0 at EOF, -1 on an error.
int64_t RecvSome(int fd, char* out, size_t size);

// Writes all of `data`; each stall waits at most `timeout_ms`. False on an error or a stall.
bool SendAll(int fd, std::string_view data, int64_t timeout_ms);

// True when the peer has closed or reset the connection, or the socket was shut down locally.
// Never blocks and never consumes bytes (a pipelined next request stays queued).
bool PeerGone(int fd);

// Ends our half of the connection and discards what the peer already sent, waiting at most
// `linger_ms` for its EOF, so closing does not reset the connection before the peer has read
// our last response (a close with unread input sends RST, which can drop that response).
// linger_ms == 0 only discards what has already arrived.
void DrainAndShutdown(int fd, int64_t linger_ms);

// Milliseconds on a monotonic clock.
int64_t NowMs();

}  // namespace tandem::agent::http::internal
