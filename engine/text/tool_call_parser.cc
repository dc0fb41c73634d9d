#include "engine/text/tool_call_parser.h"

#include <exception>

#include "common/json_depth.h"
#include "engine/text/glm_tool_parser.h"
#include "engine/text/kimi_tool_parser.h"

namespace tandem::engine::text {

StatusOr<std::unique_ptr<ToolCallParser>> NewToolCallParser(ChatFamily family,
                                                            const ToolParserOptions& options) {
  switch (family) {
    case ChatFamily::kKimiK2: return std::unique_ptr<ToolCallParser>(std::make_unique<KimiToolParser>());
    case ChatFamily::kGlm: {
      ASSIGN_OR_RETURN(GlmParamTypes types, GlmParamTypesFromTools(options.tools_json));
      return std::unique_ptr<ToolCallParser>(
          std::make_unique<GlmToolParser>(std::move(types), options.id_prefix));
    }
  }
  return Status::InvalidArgument("unknown chat family");
}

namespace internal {

size_t SafeContentLength(std::string_view buffer, std::string_view marker) {
  size_t found = buffer.find(marker);
  if (found != std::string_view::npos) return found;
  size_t longest = std::min(buffer.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (buffer.substr(buffer.size() - n) == marker.substr(0, n)) return buffer.size() - n;
  }
  return buffer.size();
}

namespace {
constexpr std::string_view kSpaces = " \t\n\r\f\v";
}  // namespace

size_t LeadingSpaces(std::string_view text) {
  size_t n = text.find_first_not_of(kSpaces);
  return n == std::string_view::npos ? text.size() : n;
}

std::string_view StripSpaces(std::string_view text) {
  size_t begin = text.find_first_not_of(kSpaces);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpaces) - begin + 1);
}

std::optional<nlohmann::ordered_json> ParseJsonValue(std::string_view text, int max_depth) {
  if (!JsonDepthWithin(text, max_depth)) return std::nullopt;
  try {
    return nlohmann::ordered_json::parse(text.begin(), text.end());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace internal
}  // namespace tandem::engine::text
