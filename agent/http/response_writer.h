#pragma once
// The ResponseWriter a handler gets: writes HTTP/1.1 responses straight to the connection's socket.
//
// Not thread-safe: the handler calls it from the connection's thread (ClientGone() included).

#include <atomic>
#include <string>
#include <string_view>

#include "agent/http/http_server.h"

namespace tandem::agent::http::internal {

// {"error":{"message":...,"type":...,"param":null,"code":null}}: the OpenAI error shape.
// type is "invalid_request_error" for 4xx statuses and "server_error" otherwise.
std::string OpenAiErrorJson(int status, std::string_view message);

class SocketResponseWriter final : public ResponseWriter {
 public:
  // `fd` stays owned by the caller. `keep_alive`: the request allows another one after it.
  // `http10`: the client cannot read chunked encoding (a stream is sent raw and the connection
  // closes). `stopping` (may be null) turns ClientGone() true and closes after this response.
  SocketResponseWriter(int fd, bool head_request, bool keep_alive, bool http10,
                       const std::atomic<bool>* stopping);

  void Send(int status, std::string_view content_type, std::string_view body,
            const HeaderList& extra_headers = {}) override;
  bool BeginStream(int status, std::string_view content_type, const HeaderList& extra_headers = {}) override;
  bool WriteChunk(std::string_view data) override;
  void EndStream() override;
  bool ClientGone() override;

  // Send or BeginStream has been called.
  bool answered() const { return state_ != State::kIdle; }
  // A whole response went out and the connection may serve the next request.
  bool reusable() const;
  // Announces and forces a close after this response (must precede Send/BeginStream to be announced).
  void CloseAfterResponse() { keep_alive_ = false; }

  // Each stalled write waits at most this long for the client to read.
  static constexpr int64_t kSendTimeoutMs = 30'000;

 private:
  enum class State { kIdle, kSent, kStreaming, kEnded };

  // Status line and headers up to and including the blank line.
  std::string Head(int status, std::string_view content_type, const HeaderList& extra_headers,
                   std::string_view framing);
  bool Write(std::string_view data);

  int fd_;
  bool head_request_;
  bool keep_alive_;
  bool http10_;
  const std::atomic<bool>* stopping_;
  State state_ = State::kIdle;
  bool failed_ = false;  // a write failed: the client is gone or stuck
  bool gone_ = false;    // ClientGone() saw it; sticky
};

}  // namespace tandem::agent::http::internal
