#pragma once
// One line of a watch stream decoded into a WatchEvent (Client::Watch). Pure; no I/O. Fuzzed with
// the line framing by controller/kube/fuzz/watch_stream_fuzz.cc (scripts/fuzz.sh watch_stream).

#include <string_view>

#include "common/status.h"
#include "controller/kube/client.h"

namespace tandem::controller::kube {

// Decodes {"type": "ADDED", "object": {...}}: the event, an object missing from the line read as
// {}. An ERROR event is returned as its Status: StatusFromHttp of the object's `code` (500 when it
// has none from 100 to 599) with `context`. A line that is not a JSON object with a string `type`,
// or nests deeper than kMaxJsonDepth (json_depth.h), is Internal: "<context>: malformed watch
// event[ (why)]: <the line's first 200 bytes>".
StatusOr<WatchEvent> DecodeWatchEvent(std::string_view line, std::string_view context);

}  // namespace tandem::controller::kube
