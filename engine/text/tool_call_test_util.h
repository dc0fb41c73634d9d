#pragma once
// Test and fuzz helper: runs a tool-call parser over a stream split into pieces and collects what
// it emitted. Header-only, no GoogleTest, so the libFuzzer target can use it too.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/tool_call_parser.h"

namespace tandem::engine::text::testing {

struct StreamResult {
  std::string content;
  std::vector<ParsedToolCall> calls;
  ToolParseStats stats;
  // Content emitted before Finish (what a client saw while the model was still generating).
  std::string content_before_finish;
};

inline StreamResult RunStream(ToolCallParser& parser, const std::vector<std::string_view>& pieces) {
  StreamResult r;
  auto collect = [&r](ToolParseDelta d) {
    r.content += d.content;
    for (auto& c : d.tool_calls) r.calls.push_back(std::move(c));
  };
  for (std::string_view piece : pieces) collect(parser.Feed(piece));
  r.content_before_finish = r.content;
  collect(parser.Finish());
  r.stats = parser.stats();
  return r;
}

inline StreamResult RunStream(ChatFamily family, const std::vector<std::string_view>& pieces,
                              const ToolParserOptions& options = {}) {
  auto parser = NewToolCallParser(family, options);
  return RunStream(**parser, pieces);
}

// The whole text, one byte per delta.
inline std::vector<std::string_view> Bytes(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < text.size(); ++i) pieces.push_back(text.substr(i, 1));
  return pieces;
}

}  // namespace tandem::engine::text::testing
