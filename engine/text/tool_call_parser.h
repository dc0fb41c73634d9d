#pragma once
// Streaming tool-call parsers: turn the text a model generates, fed delta by delta, into OpenAI
// chat-completion content and `tool_calls`. One parser per response; not thread-safe.
//
// Contract shared by the Kimi K2 and GLM parsers (docs/chat-templates.md):
// - Content is emitted as soon as it cannot be the start of a tool-call marker; a tail that could
//   be (e.g. "<tool_ca") is held back until the next Feed or Finish decides, so no partial marker
//   ever reaches a client as content.
// - A tool call is emitted whole, with its complete arguments, once its end marker arrives
//   (OpenAI clients accept one delta carrying the whole call).
// - A malformed call (bad JSON, a missing end marker at end of stream, a marker nested where it
//   cannot be) is emitted verbatim as content and counted in `tool_call_parse_errors`. Nothing
//   is dropped except the markers and separating whitespace of well-formed calls, counted in
//   `markup_bytes`: for any input, content bytes + markup_bytes == input bytes.
// - The result does not depend on how the text is split into deltas.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/text/chat_types.h"

namespace tandem::engine::text {

// One OpenAI tool call: {id, type: "function", function: {name, arguments}}.
struct ParsedToolCall {
  int index = 0;   // position among this response's tool calls (the streaming `index`)
  std::string id;  // Kimi: the model's "functions.NAME:IDX"; GLM: id_prefix + index
  std::string name;
  std::string arguments;  // a JSON object as text

  friend bool operator==(const ParsedToolCall&, const ParsedToolCall&) = default;
};

// What one Feed or Finish call produced.
struct ToolParseDelta {
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  bool empty() const { return content.empty() && tool_calls.empty(); }
};

struct ToolParseStats {
  int64_t tool_calls = 0;
  int64_t tool_call_parse_errors = 0;
  int64_t markup_bytes = 0;  // input bytes consumed as tool-call syntax (markers, names, arguments)
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;

  // The next piece of generated text (any split, even inside a marker or a UTF-8 character).
  virtual ToolParseDelta Feed(std::string_view text) = 0;
  // End of generation: decides whatever was held back. Call once; Feed after Finish is a bug.
  virtual ToolParseDelta Finish() = 0;

  const ToolParseStats& stats() const { return stats_; }

 protected:
  ToolParseStats stats_;
};

struct ToolParserOptions {
  // The request's tool declarations (OpenAI JSON). GLM uses their parameter types to turn
  // <arg_value> text into JSON numbers, booleans, arrays or objects; without them values stay
  // strings. Kimi ignores them (its arguments already are JSON).
  std::vector<std::string> tools_json;
  // GLM calls carry no id; they get id_prefix + index. Make the prefix unique per response.
  std::string id_prefix = "call_";
};

// The parser for `family`. Errors: InvalidArgument when a tools_json entry is not valid JSON.
StatusOr<std::unique_ptr<ToolCallParser>> NewToolCallParser(ChatFamily family,
                                                            const ToolParserOptions& options);

namespace internal {

// How many leading bytes of `buffer` are certainly not part of `marker`: the position of the
// first full occurrence, else of the longest suffix that is a proper prefix of `marker`, else
// buffer.size().
size_t SafeContentLength(std::string_view buffer, std::string_view marker);

// The leading ASCII whitespace of `text`, as a count.
size_t LeadingSpaces(std::string_view text);
std::string_view StripSpaces(std::string_view text);

// Parses a JSON value, refusing nesting deeper than `max_depth` (the parser and the serializer
// recurse, and model output is untrusted). Never throws.
std::optional<nlohmann::ordered_json> ParseJsonValue(std::string_view text, int max_depth = 64);

}  // namespace internal
}  // namespace tandem::engine::text
