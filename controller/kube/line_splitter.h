#pragma once
// The framing of a watch stream: a chunked HTTP body, cut anywhere by the transport, split into
// newline-delimited lines (HttpClient::Stream). Pure; no I/O. Fuzzed with the decoding of the
// lines by controller/kube/fuzz/watch_stream_fuzz.cc (scripts/fuzz.sh watch_stream).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::controller::kube {

// Splits a byte stream, fed in pieces, into lines. "\n" ends a line; one "\r" before it is
// dropped; empty lines are skipped. Which lines come out, and where the stream ends, does not
// depend on where the pieces were cut. Not thread-safe.
class LineSplitter {
 public:
  using OnLine = std::function<bool(std::string_view line)>;  // false: stop

  // A line longer than max_line_bytes (counted without its "\n") ends the stream with an error.
  explicit LineSplitter(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Appends `data` and hands every line it completes to `on_line`, in order. Returns false once
  // the stream is over: on_line returned false (stopped()) or a line was too long (status());
  // later calls do nothing and return false.
  bool Feed(std::string_view data, const OnLine& on_line);

  // The stream ended: hands over the last line when it had no "\n". Does nothing once Feed has
  // returned false.
  void Finish(const OnLine& on_line);

  bool stopped() const { return stopped_; }
  // OK, or InvalidArgument naming the limit once a line was longer than max_line_bytes.
  const Status& status() const { return status_; }

 private:
  bool Deliver(std::string_view line, const OnLine& on_line);

  const size_t max_line_bytes_;
  std::string pending_;  // the unfinished line
  bool stopped_ = false;
  Status status_;
};

}  // namespace tandem::controller::kube
