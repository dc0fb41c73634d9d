#pragma once
// GLM tool calls, as the model writes them (GLM 4.5/4.6 put each part on its own line; the parser
// ignores whitespace between the parts, so the one-line form is accepted too):
//   <tool_call>NAME
//   <arg_key>KEY</arg_key>
//   <arg_value>VALUE</arg_value>
//   ...
//   </tool_call>
// VALUE is raw text. With the tool's JSON schema, a parameter whose type is not "string" is parsed
// as JSON (42, true, [1,2], {"a":1}); a value that does not parse stays a string. Without a schema
// every value is a string. Arguments come out as compact JSON in the model's key order.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/text/tool_call_parser.h"

namespace tandem::engine::text {

inline constexpr std::string_view kGlmCallBegin = "<tool_call>";
inline constexpr std::string_view kGlmCallEnd = "</tool_call>";

// function name -> parameter name -> true when the value should stay a string.
using GlmParamTypes = std::map<std::string, std::map<std::string, bool, std::less<>>, std::less<>>;

// Reads `parameters.properties.*.type` of each OpenAI tool. A parameter is a string parameter when
// its type is "string" or a list holding "string"; missing types count as strings.
// Errors: InvalidArgument when an entry is not valid JSON.
StatusOr<GlmParamTypes> GlmParamTypesFromTools(const std::vector<std::string>& tools_json);

class GlmToolParser final : public ToolCallParser {
 public:
  GlmToolParser(GlmParamTypes types, std::string id_prefix)
      : types_(std::move(types)), id_prefix_(std::move(id_prefix)) {}

  ToolParseDelta Feed(std::string_view text) override;
  ToolParseDelta Finish() override;

 private:
  bool DrainContent(bool at_end, ToolParseDelta& out);
  bool DrainCall(bool at_end, ToolParseDelta& out);
  void Drain(bool at_end, ToolParseDelta& out);
  // Emits buffer_[0, length) (a whole <tool_call>…</tool_call>) as a call, or as content.
  void EmitCall(size_t length, ToolParseDelta& out);
  void EmitMalformed(size_t length, ToolParseDelta& out);
  // The arguments object of a call body (after NAME), or nullopt when malformed.
  std::optional<std::string> Arguments(std::string_view name, std::string_view body) const;

  GlmParamTypes types_;
  std::string id_prefix_;
  std::string buffer_;  // in a call, starts with <tool_call>
  bool in_call_ = false;
  bool after_call_ = false;  // whitespace after a call is markup if another call follows
  int next_index_ = 0;
};

}  // namespace tandem::engine::text
