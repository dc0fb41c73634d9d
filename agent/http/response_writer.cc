#include "agent/http/response_writer.h"

#include <cctype>
#include <cstdio>

#include <boost/beast/http/status.hpp>

#include "agent/http/socket_io.h"
#include "common/logging.h"

namespace tandem::agent::http::internal {
namespace {

namespace bhttp = boost::beast::http;

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          *out += escaped;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool HasLineBreak(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

// Headers the writer owns: a handler's copy would contradict the framing.
bool IsFramingHeader(std::string_view name) {
  return IEquals(name, "content-length") || IEquals(name, "transfer-encoding") || IEquals(name, "connection");
}

}  // namespace

std::string OpenAiErrorJson(int status, std::string_view message) {
  std::string out = "{\"error\":{\"message\":";
  AppendJsonString(message, &out);
  out += ",\"type\":";
  out += status >= 400 && status < 500 ? "\"invalid_request_error\"" : "\"server_error\"";
  out += ",\"param\":null,\"code\":null}}";
  return out;
}

SocketResponseWriter::SocketResponseWriter(int fd, bool head_request, bool keep_alive, bool http10,
                                           const std::atomic<bool>* stopping)
    : fd_(fd), head_request_(head_request), keep_alive_(keep_alive), http10_(http10), stopping_(stopping) {}

bool SocketResponseWriter::reusable() const {
  bool complete = state_ == State::kSent || state_ == State::kEnded;
  return complete && keep_alive_ && !failed_;
}

std::string SocketResponseWriter::Head(int status, std::string_view content_type,
                                       const HeaderList& extra_headers, std::string_view framing) {
  for (const auto& [name, value] : extra_headers) {
    if (IEquals(name, "connection") && IEquals(value, "close")) keep_alive_ = false;
  }
  if (stopping_ != nullptr && stopping_->load()) keep_alive_ = false;
  std::string head = "HTTP/1.1 " + std::to_string(status) + " ";
  boost::beast::string_view reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  head.append(reason.data(), reason.size());
  head += "\r\n";
  if (!content_type.empty()) {
    head += "Content-Type: ";
    head += content_type;
    head += "\r\n";
  }
  head += framing;
  head += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : extra_headers) {
    if (IsFramingHeader(name)) continue;
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value)) {
      TANDEM_LOG(Warning) << "dropping a response header with a line break or no name";
      continue;
    }
    head += name + ": " + value + "\r\n";
  }
  head += "\r\n";
  return head;
}

bool SocketResponseWriter::Write(std::string_view data) {
  if (failed_) return false;
  if (!SendAll(fd_, data, kSendTimeoutMs)) failed_ = true;
  return !failed_;
}

void SocketResponseWriter::Send(int status, std::string_view content_type, std::string_view body,
                                const HeaderList& extra_headers) {
  if (state_ != State::kIdle) {
    TANDEM_LOG(Error) << "ResponseWriter::Send after the response was started; ignored";
    return;
  }
  state_ = State::kSent;
  // RFC 9110: 1xx, 204 and 304 responses carry neither a body nor (for 1xx/204) a length.
  const bool bodiless = (status >= 100 && status < 200) || status == 204 || status == 304;
  std::string framing = bodiless ? std::string() : "Content-Length: " + std::to_string(body.size()) + "\r\n";
  std::string out = Head(status, content_type, extra_headers, framing);
  if (!head_request_ && !bodiless) out += body;
  Write(out);
}

bool SocketResponseWriter::BeginStream(int status, std::string_view content_type,
                                       const HeaderList& extra_headers) {
  if (state_ != State::kIdle) {
    TANDEM_LOG(Error) << "ResponseWriter::BeginStream after the response was started; ignored";
    return false;
  }
  state_ = State::kStreaming;
  // HTTP/1.0 has no chunked encoding: the body runs to the close.
  if (http10_) keep_alive_ = false;
  std::string framing =
      http10_ ? "Cache-Control: no-cache\r\n" : "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
  return Write(Head(status, content_type, extra_headers, framing));
}

bool SocketResponseWriter::WriteChunk(std::string_view data) {
  if (state_ != State::kStreaming) return false;
  if (data.empty() || head_request_) return !failed_;  // an empty chunk would end the stream
  if (http10_) return Write(data);
  char size_line[24];
  std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
  std::string out;
  out.reserve(data.size() + 32);
  out += size_line;
  out += data;
  out += "\r\n";
  return Write(out);
}

void SocketResponseWriter::EndStream() {
  if (state_ != State::kStreaming) return;
  state_ = State::kEnded;
  if (!http10_ && !head_request_) Write("0\r\n\r\n");
}

bool SocketResponseWriter::ClientGone() {
  if (!gone_) gone_ = failed_ || (stopping_ != nullptr && stopping_->load()) || PeerGone(fd_);
  return gone_;
}

}  // namespace tandem::agent::http::internal
