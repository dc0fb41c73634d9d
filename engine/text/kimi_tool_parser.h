#pragma once
// Kimi K2 tool calls, as the model writes them:
//   <|tool_calls_section_begin|>
//     <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>
//     ... more calls ...
//   <|tool_calls_section_end|>
// The id is the model's "functions.NAME:IDX"; NAME is what lies between the optional
// "functions." prefix and the ":IDX" suffix. Arguments must be a JSON object; they are passed on
// verbatim (less surrounding whitespace). Whitespace between calls is markup.

#include <string>
#include <string_view>

#include "engine/text/tool_call_parser.h"

namespace tandem::engine::text {

inline constexpr std::string_view kKimiSectionBegin = "<|tool_calls_section_begin|>";
inline constexpr std::string_view kKimiSectionEnd = "<|tool_calls_section_end|>";
inline constexpr std::string_view kKimiCallBegin = "<|tool_call_begin|>";
inline constexpr std::string_view kKimiArgumentBegin = "<|tool_call_argument_begin|>";
inline constexpr std::string_view kKimiCallEnd = "<|tool_call_end|>";

class KimiToolParser final : public ToolCallParser {
 public:
  ToolParseDelta Feed(std::string_view text) override;
  ToolParseDelta Finish() override;

 private:
  // Each returns true when it consumed something and the loop should look again.
  bool DrainContent(bool at_end, ToolParseDelta& out);
  bool DrainSection(bool at_end, ToolParseDelta& out);
  void Drain(bool at_end, ToolParseDelta& out);
  // Emits `text` (a whole <|tool_call_begin|>…<|tool_call_end|>) as a call, or as content.
  void EmitCall(std::string_view text, ToolParseDelta& out);
  void EmitMalformed(size_t length, ToolParseDelta& out);

  std::string buffer_;
  bool in_section_ = false;
  bool section_emitted_ = false;  // this section produced a call or malformed content
  std::string section_spaces_;    // whitespace after the section began, until it emitted
  int next_index_ = 0;
};

}  // namespace tandem::engine::text
