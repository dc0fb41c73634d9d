// libFuzzer target: arbitrary bytes as model output for the Kimi K2 and GLM tool-call parsers,
// split into arbitrary deltas. Built with clang by scripts/fuzz.sh, not by CMake.
//
// Input layout: byte 0 picks the family (bit 0) and whether GLM gets a tool schema (bit 1); bytes
// 1..4 seed the split points; the rest is the generated text. Invariants beyond "no crash, no
// sanitizer report":
// - the split result equals the one-delta result (content, calls, error count, markup bytes);
// - content bytes + markup bytes == input bytes (nothing lost, nothing duplicated);
// - every call has a name, its index, and arguments that parse as a JSON object;
// - text without the family's begin marker comes back unchanged, with no calls and no errors.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "engine/text/glm_tool_parser.h"
#include "engine/text/kimi_tool_parser.h"
#include "engine/text/tool_call_test_util.h"

namespace {

using tandem::engine::text::ChatFamily;
using tandem::engine::text::ToolParserOptions;
using tandem::engine::text::testing::RunStream;
using tandem::engine::text::testing::StreamResult;

void Check(bool ok) {
  if (!ok) std::abort();
}

std::vector<std::string_view> RandomSplit(std::string_view text, uint32_t seed) {
  std::vector<std::string_view> pieces;
  uint64_t state = seed | 1;
  while (!text.empty()) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    size_t n = std::min<size_t>(text.size(), state % 19);  // 0..18 bytes, empty deltas included
    pieces.push_back(text.substr(0, n));
    text.remove_prefix(n);
  }
  return pieces;
}

bool SameResult(const StreamResult& a, const StreamResult& b) {
  return a.content == b.content && a.calls == b.calls &&
         a.stats.tool_call_parse_errors == b.stats.tool_call_parse_errors &&
         a.stats.markup_bytes == b.stats.markup_bytes && a.stats.tool_calls == b.stats.tool_calls;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const ChatFamily family = (data[0] & 1) ? ChatFamily::kGlm : ChatFamily::kKimiK2;
  ToolParserOptions options;
  if (data[0] & 2) {
    options.tools_json = {R"({"type":"function","function":{"name":"f","parameters":{"properties":)"
                          R"({"n":{"type":"integer"},"o":{"type":"object"},"s":{"type":"string"}}}}})"};
  }
  const uint32_t seed = data[1] | data[2] << 8 | data[3] << 16 | static_cast<uint32_t>(data[4]) << 24;
  std::string_view text(reinterpret_cast<const char*>(data) + 5, size - 5);

  StreamResult whole = RunStream(family, {text}, options);
  StreamResult split = RunStream(family, RandomSplit(text, seed), options);
  Check(SameResult(whole, split));
  Check(whole.content.size() + static_cast<size_t>(whole.stats.markup_bytes) == text.size());
  Check(whole.stats.tool_calls == static_cast<int64_t>(whole.calls.size()));
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    const auto& call = whole.calls[i];
    Check(call.index == static_cast<int>(i) && !call.name.empty() && !call.id.empty());
    auto args = tandem::engine::text::internal::ParseJsonValue(call.arguments);
    Check(args.has_value() && args->is_object());
  }
  std::string_view marker = family == ChatFamily::kGlm ? tandem::engine::text::kGlmCallBegin
                                                       : tandem::engine::text::kKimiSectionBegin;
  if (text.find(marker) == std::string_view::npos) {
    Check(whole.content == text && whole.calls.empty() && whole.stats.tool_call_parse_errors == 0);
  }
  return 0;
}
