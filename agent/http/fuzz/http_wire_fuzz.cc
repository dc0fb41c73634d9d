// libFuzzer target for the agent's HTTP/1.1 wire: the request reader (Beast's parser under our
// limits) and the response writer (Content-Length bodies, chunked SSE streams, HTTP/1.0 raw
// streams, HEAD). Built with clang by scripts/fuzz.sh, not by CMake.
//
// Input: byte 0 picks the body limit, byte 1 the header limit, byte 2 how each request is
// answered and the body budget (bit 4: half the body limit, so bigger bodies are refused 429;
// bit 3: 64 bytes of each body free of charge); the rest is what a client sends on one connection
// (pipelined requests, garbage, a request cut short). The bytes go through a socketpair whose
// client half is then shut, exactly as the server reads a socket.
// Invariants beyond "no crash, no sanitizer report, no exception":
// - a request that parses has a method, a target that splits into path + query, lower-case
//   header names without duplicates, and a body within the limit;
// - a refusal is 400, 413, 429 (with Retry-After, only over the budget) or 431 with a message,
//   and ends the connection; a request is charged exactly its body's heap bytes beyond the free
//   part, never more than the limit, and every byte goes back;
// - every answer a client reads back parses with a strict HTTP/1.1 response parser: the status
//   sent, the body (or the chunked stream's chunks, in order, the empty ones skipped; nothing
//   for HEAD) byte for byte, and Connection: close exactly when the reader said no keep-alive;
//   an HTTP/1.0 stream is the chunks raw, to the close.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/http/request_reader.h"
#include "agent/http/response_writer.h"
#include "agent/http/socket_io.h"

namespace {

namespace bhttp = boost::beast::http;
using tandem::agent::http::HttpRequest;
using tandem::agent::http::internal::BodyBudget;
using tandem::agent::http::internal::BodyLease;
using tandem::agent::http::internal::NowMs;
using tandem::agent::http::internal::ReadLimits;
using tandem::agent::http::internal::ReadRequest;
using tandem::agent::http::internal::ReadResult;
using tandem::agent::http::internal::SocketResponseWriter;

void Check(bool ok) {
  if (!ok) std::abort();
}

// Everything the client half can read now (the server half has finished writing).
std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reads the client half on a thread while the server half writes: a stream of many tiny chunks
// outgrows the socket buffer (AF_UNIX charges every small write its full buffer overhead), so a
// reader that only came afterwards would leave SendAll waiting on it, as no real client does.
class ClientReader {
 public:
  explicit ClientReader(int fd) : fd_(fd) {
    Check(pipe(wake_) == 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~ClientReader() {
    close(wake_[0]);
    close(wake_[1]);
  }
  // Everything the client half read, once the writer has finished.
  std::string Finish() {
    Check(write(wake_[1], "x", 1) == 1);
    thread_.join();
    out_ += Drain(fd_);
    return std::move(out_);
  }

 private:
  void Run() {
    for (;;) {
      out_ += Drain(fd_);
      pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      Check(poll(p, 2, -1) > 0);
      if (p[1].revents != 0) return;
    }
  }
  int fd_;
  int wake_[2];
  std::string out_;
  std::thread thread_;
};

void CheckRequest(const HttpRequest& r, const ReadLimits& limits) {
  Check(!r.method.empty() && !r.target.empty());
  Check(r.target.starts_with(r.path));
  Check(r.target == r.path || r.target == r.path + "?" + r.query);
  Check(r.path.find('?') == std::string::npos);
  Check(r.body.size() <= limits.max_body_bytes);
  for (size_t i = 0; i < r.headers.size(); ++i) {
    const std::string& name = r.headers[i].first;
    Check(!name.empty());
    for (char c : name) Check(!(c >= 'A' && c <= 'Z'));
    for (size_t j = 0; j < i; ++j) Check(r.headers[j].first != name);
  }
}

// Answers `r` as chosen by `mode`, then parses what the client half reads back.
void Answer(int server, int client, const HttpRequest& r, const ReadResult& read, uint8_t mode) {
  const bool head = r.method == "HEAD";
  SocketResponseWriter writer(server, head, read.keep_alive, read.http10, nullptr);
  // The body cut into pieces of 1..8 bytes (some empty), as tokens stream out.
  std::vector<std::string> pieces;
  const size_t step = 1 + (mode >> 5);
  for (size_t at = 0; at < r.body.size(); at += step) {
    pieces.push_back(r.body.substr(at, step));
    if ((mode & 8) != 0 && pieces.size() % 3 == 0) pieces.emplace_back();
  }
  const bool stream = (mode & 1) != 0;
  const int status = stream ? 200 : 200 + (mode & 6) * 50;  // 200, 300, 400, 500: all carry bodies
  std::string expected;
  for (const std::string& p : pieces) expected += p;
  // A few writes fit the socket buffer; a long stream of tiny chunks needs a reader meanwhile.
  std::optional<ClientReader> reader;
  if (stream && pieces.size() > 64) reader.emplace(client);
  if (stream) {
    Check(writer.BeginStream(status, "text/event-stream", {{"X-Accel-Buffering", "no"}}));
    for (const std::string& p : pieces) Check(writer.WriteChunk(p));
    writer.EndStream();
  } else {
    writer.Send(status, "application/json", expected, {{"Retry-After", "1"}});
  }
  const std::string wire = reader ? reader->Finish() : Drain(client);
  if (stream && read.http10) {
    // No chunked encoding: the head, then the body raw, ended by the close.
    const size_t end = wire.find("\r\n\r\n");
    Check(end != std::string::npos);
    Check(wire.substr(end + 4) == (head ? std::string() : expected));
    Check(wire.find("Connection: close\r\n") < end);
    return;
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.eager(true);
  parser.body_limit(1 << 20);
  if (head) parser.skip(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < wire.size() && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
    Check(!ec);
    if (n == 0) break;
    used += n;
  }
  Check(parser.is_done() && used == wire.size());
  Check(parser.get().result_int() == static_cast<unsigned>(status));
  Check(parser.get().body() == (head ? std::string() : expected));
  Check(parser.get().keep_alive() == (read.keep_alive && !(stream && read.http10)));
  Check(writer.reusable() == parser.get().keep_alive());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  ReadLimits limits;
  limits.max_body_bytes = static_cast<size_t>(data[0] % 9) * 256;
  limits.max_header_bytes = 32 + static_cast<size_t>(data[1]) * 8;
  limits.header_timeout_ms = 1000;
  limits.body_stall_ms = 1000;
  const uint8_t mode = data[2];
  int fds[2];
  Check(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  const int server = fds[0], client = fds[1];
  // The whole input fits the socket buffer (-max_len is far below it); then the client stops
  // sending, so every read ends in a request, a refusal or EOF without waiting out a deadline.
  Check(tandem::agent::http::internal::SendAll(
      client, std::string_view(reinterpret_cast<const char*>(data) + 3, size - 3), 1000));
  Check(shutdown(client, SHUT_WR) == 0);
  const bool budgeted = (mode & 16) != 0;
  BodyBudget budget(budgeted ? limits.max_body_bytes / 2 : limits.max_body_bytes, (mode & 8) != 0 ? 64 : 0);
  boost::beast::flat_buffer buffer;
  for (int i = 0; i < 64; ++i) {
    BodyLease lease(&budget);
    HttpRequest request;
    const ReadResult read = ReadRequest(server, limits, NowMs() + 1000, -1, buffer, lease, &request);
    Check(lease.charged() <= budget.limit() && budget.used() == lease.charged());
    Check(lease.charged() == (lease.held() > budget.free_bytes() ? lease.held() - budget.free_bytes() : 0));
    if (read.kind == ReadResult::Kind::kClosed) break;
    if (read.kind == ReadResult::Kind::kReject) {
      Check(read.status == 400 || read.status == 413 || read.status == 431 ||
            (budgeted && read.status == 429));
      Check((read.status == 429) == (read.retry_after_s == 1));
      Check(!read.message.empty());
      break;
    }
    // Every heap byte of the body is charged (a short one lives inside the string).
    Check(request.body.capacity() <= std::string().capacity() || lease.held() >= request.body.capacity());
    CheckRequest(request, limits);
    (void)Drain(client);  // a "100 Continue" the reader sent
    Answer(server, client, request, read, mode);
    if (!read.keep_alive || (read.http10 && (mode & 1) != 0)) break;
  }
  Check(budget.used() == 0);
  close(server);
  close(client);
  return 0;
}
