// libFuzzer target for a watch stream off the network (scripts/fuzz.sh watch_stream): the body
// framed into lines by LineSplitter, each line decoded by DecodeWatchEvent, the stream ending at
// the first line that does not decode (as Client::Watch ends it).
// Input: byte 0 picks the line limit (bit 7: 1 MiB, else 8 + 4 * low bits), byte 1 seeds where
// the body is cut into pieces; the rest is the body.
// Invariants: fed whole, fed in seeded pieces, fed byte by byte and split by a reference, the
// body gives the same lines and ends the same way; no line is empty, holds "\n" or passes the
// limit; an event is the line's type and object, and re-encoding it decodes to the same event;
// an ERROR line is the Status of its code (500 without one from 100 to 599); anything else, or
// anything nested deeper than kMaxJsonDepth, is a clean Internal naming the line.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "controller/kube/client.h"
#include "controller/kube/json_depth.h"
#include "controller/kube/line_splitter.h"
#include "controller/kube/watch_event.h"

namespace {

using tandem::Status;
using tandem::StatusCode;
using tandem::StatusOr;
using tandem::controller::kube::DecodeWatchEvent;
using tandem::controller::kube::Json;
using tandem::controller::kube::kMaxJsonDepth;
using tandem::controller::kube::LineSplitter;
using tandem::controller::kube::StatusFromHttp;
using tandem::controller::kube::WatchEvent;

constexpr std::string_view kContext = "WATCH /api/v1/pods";

void Require(bool condition) {
  if (!condition) std::abort();
}

// What the stream delivered, and how it ended.
struct Outcome {
  std::vector<std::string> lines;
  bool stopped = false;
  StatusCode code = StatusCode::kOk;
  bool operator==(const Outcome&) const = default;
};

// How deeply `value` nests arrays and objects (a scalar: 0).
int Depth(const Json& value) {
  int deepest = 0;
  if (value.is_structured()) {
    for (const Json& child : value) deepest = std::max(deepest, Depth(child));
    return deepest + 1;
  }
  return 0;
}

// The Status that `line` must decode to when it is an ERROR event (`parsed`).
Status WantErrorStatus(const Json& parsed) {
  const Json object = parsed.contains("object") ? parsed["object"] : Json::object();
  int code = 500;
  if (object.is_object() && object.contains("code") && object["code"].is_number_integer()) {
    const Json& c = object["code"];
    if (c.is_number_unsigned() ? c.get<uint64_t>() <= 599 && c.get<uint64_t>() >= 100
                               : c.get<int64_t>() >= 100 && c.get<int64_t>() <= 599) {
      code = c.get<int>();
    }
  }
  return StatusFromHttp(code, object.dump(-1, ' ', false, Json::error_handler_t::replace), kContext);
}

// Decodes one line and checks it against nlohmann's own reading of it. Returns false where
// Client::Watch ends the stream (the line is not an event).
bool CheckLine(std::string_view line, size_t max_line_bytes) {
  Require(!line.empty() && line.size() <= max_line_bytes);
  Require(line.find('\n') == std::string_view::npos);
  const StatusOr<WatchEvent> event = DecodeWatchEvent(line, kContext);
  const Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  const bool is_event = parsed.is_object() && parsed.contains("type") && parsed["type"].is_string();
  if (!is_event || Depth(parsed) > kMaxJsonDepth) {
    Require(!event.ok() && event.status().code() == StatusCode::kInternal);
    const std::string& message = event.status().message();
    const std::string prefix = std::string(kContext) + ": malformed watch event";
    const std::string suffix = ": " + std::string(line.substr(0, 200));
    Require(message.starts_with(prefix) && message.ends_with(suffix) &&
            message.size() <= prefix.size() + suffix.size() + 40);
    return false;
  }
  const std::string type = parsed["type"].get<std::string>();
  if (type == "ERROR") {
    Require(!event.ok());
    const Status want = WantErrorStatus(parsed);
    Require(event.status().code() == want.code() && event.status().message() == want.message());
    return false;
  }
  Require(event.ok() && event->type == type);
  Require(event->object == (parsed.contains("object") ? parsed["object"] : Json::object()));
  // Printed back and read again: the same event (strict UTF-8: a decoded string is valid UTF-8).
  const std::string again = Json{{"type", event->type}, {"object", event->object}}.dump();
  const StatusOr<WatchEvent> reread = DecodeWatchEvent(again, kContext);
  Require(reread.ok() && reread->type == event->type && reread->object == event->object);
  return true;
}

// Feeds `body` to a LineSplitter in pieces of the given sizes (cycled; 0 is an empty piece), or
// whole when `pieces` is empty.
Outcome Split(std::string_view body, size_t max_line_bytes, const std::vector<size_t>& pieces) {
  Outcome out;
  LineSplitter splitter(max_line_bytes);
  const LineSplitter::OnLine on_line = [&](std::string_view line) {
    out.lines.emplace_back(line);
    return CheckLine(line, max_line_bytes);
  };
  bool more = true;
  if (pieces.empty()) {
    more = splitter.Feed(body, on_line);
  } else {
    for (size_t at = 0, i = 0; more && at < body.size(); ++i) {
      const size_t n = std::min(pieces[i % pieces.size()], body.size() - at);
      more = splitter.Feed(body.substr(at, n), on_line);
      at += n;
    }
  }
  if (more) splitter.Finish(on_line);
  out.stopped = splitter.stopped();
  out.code = splitter.status().code();
  return out;
}

// The framing, written out plainly: segments between "\n"s, each checked against the limit, one
// trailing "\r" dropped, empty ones skipped.
Outcome ReferenceSplit(std::string_view body, size_t max_line_bytes) {
  Outcome out;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(start, end - start);
    start = end + 1;
    if (line.size() > max_line_bytes) {
      out.code = StatusCode::kInvalidArgument;
      return out;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    out.lines.emplace_back(line);
    if (!CheckLine(line, max_line_bytes)) {
      out.stopped = true;
      return out;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t max_line_bytes =
      (data[0] & 0x80) != 0 ? size_t{1} << 20 : 8 + 4 * static_cast<size_t>(data[0] & 0x7f);
  uint32_t seed = data[1];
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::vector<size_t> pieces;
  for (int i = 0; i < 8; ++i) {
    seed = seed * 1103515245u + 12345u;
    pieces.push_back((seed >> 16) % 24);  // 0..23 bytes: cuts inside "\r\n", keys, UTF-8
  }
  pieces.push_back(1);  // never only empty pieces
  const Outcome want = ReferenceSplit(body, max_line_bytes);
  Require(Split(body, max_line_bytes, {}) == want);
  Require(Split(body, max_line_bytes, pieces) == want);
  Require(Split(body, max_line_bytes, {1}) == want);
  return 0;
}
