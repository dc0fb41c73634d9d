#include "engine/text/glm_tool_parser.h"

#include <algorithm>
#include <set>

#include "engine/text/py_json.h"

namespace tandem::engine::text {
namespace {

using internal::LeadingSpaces;
using internal::StripSpaces;

constexpr std::string_view kKeyBegin = "<arg_key>";
constexpr std::string_view kKeyEnd = "</arg_key>";
constexpr std::string_view kValueBegin = "<arg_value>";
constexpr std::string_view kValueEnd = "</arg_value>";

bool IsStringType(const nlohmann::ordered_json& type) {
  if (type.is_string()) return type.get<std::string>() == "string";
  if (type.is_array()) {
    return std::any_of(type.begin(), type.end(), [](const auto& t) { return t == "string"; });
  }
  return true;  // no usable type: keep the model's text
}

// Reads `<open>TEXT<close>` at the start of `rest` (after whitespace); advances `rest` past it.
std::optional<std::string_view> TakeTagged(std::string_view& rest, std::string_view open,
                                           std::string_view close) {
  rest.remove_prefix(LeadingSpaces(rest));
  if (!rest.starts_with(open)) return std::nullopt;
  size_t end = rest.find(close, open.size());
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view text = rest.substr(open.size(), end - open.size());
  rest.remove_prefix(end + close.size());
  return text;
}

}  // namespace

StatusOr<GlmParamTypes> GlmParamTypesFromTools(const std::vector<std::string>& tools_json) {
  GlmParamTypes types;
  for (size_t i = 0; i < tools_json.size(); ++i) {
    ASSIGN_OR_RETURN(nlohmann::ordered_json tool,
                     ParseOrderedJson(tools_json[i], "tools[" + std::to_string(i) + "]"));
    const nlohmann::ordered_json* fn =
        tool.is_object() && tool.contains("function") ? &tool["function"] : &tool;
    if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) continue;
    auto& params = types[(*fn)["name"].get<std::string>()];
    const auto& parameters = fn->value("parameters", nlohmann::ordered_json::object());
    if (!parameters.is_object() || !parameters.contains("properties")) continue;
    const auto& properties = parameters["properties"];
    if (!properties.is_object()) continue;
    for (const auto& [param, schema] : properties.items()) {
      params[param] = !schema.is_object() || !schema.contains("type") || IsStringType(schema["type"]);
    }
  }
  return types;
}

ToolParseDelta GlmToolParser::Feed(std::string_view text) {
  buffer_.append(text);
  ToolParseDelta out;
  Drain(/*at_end=*/false, out);
  return out;
}

ToolParseDelta GlmToolParser::Finish() {
  ToolParseDelta out;
  Drain(/*at_end=*/true, out);
  return out;
}

void GlmToolParser::Drain(bool at_end, ToolParseDelta& out) {
  while (in_call_ ? DrainCall(at_end, out) : DrainContent(at_end, out)) {
  }
}

bool GlmToolParser::DrainContent(bool at_end, ToolParseDelta& out) {
  if (after_call_) {
    // The newline the template puts between calls (and after the last one) is not content.
    size_t spaces = LeadingSpaces(buffer_);
    std::string_view rest = std::string_view(buffer_).substr(spaces);
    bool undecided = rest.size() < kGlmCallBegin.size() && kGlmCallBegin.starts_with(rest);
    if (undecided && !at_end) return false;
    if (rest.empty() || rest.starts_with(kGlmCallBegin)) {
      stats_.markup_bytes += static_cast<int64_t>(spaces);
      buffer_.erase(0, spaces);
    }
    after_call_ = false;
  }
  size_t begin = buffer_.find(kGlmCallBegin);
  if (begin != std::string::npos) {
    out.content.append(buffer_, 0, begin);
    buffer_.erase(0, begin);
    in_call_ = true;
    return true;
  }
  size_t safe = at_end ? buffer_.size() : internal::SafeContentLength(buffer_, kGlmCallBegin);
  out.content.append(buffer_, 0, safe);
  buffer_.erase(0, safe);
  return false;
}

bool GlmToolParser::DrainCall(bool at_end, ToolParseDelta& out) {
  // buffer_ starts with <tool_call>. A second <tool_call> before the end means this one is broken.
  size_t end = buffer_.find(kGlmCallEnd, kGlmCallBegin.size());
  size_t nested = buffer_.find(kGlmCallBegin, kGlmCallBegin.size());
  if (nested < end) {
    EmitMalformed(nested, out);
  } else if (end != std::string::npos) {
    EmitCall(end + kGlmCallEnd.size(), out);
  } else if (at_end) {
    EmitMalformed(buffer_.size(), out);  // no </tool_call> before the stream ended
  } else {
    return false;
  }
  in_call_ = false;
  return true;
}

void GlmToolParser::EmitCall(size_t length, ToolParseDelta& out) {
  std::string_view text = std::string_view(buffer_).substr(0, length);
  std::string_view inner =
      text.substr(kGlmCallBegin.size(), length - kGlmCallBegin.size() - kGlmCallEnd.size());
  size_t first_key = std::min(inner.find(kKeyBegin), inner.size());
  std::string_view name = StripSpaces(inner.substr(0, first_key));
  bool name_ok = !name.empty() && std::none_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) <= ' ' || c == '<' || c == '>';
  });
  std::optional<std::string> arguments;
  if (name_ok) arguments = Arguments(name, inner.substr(first_key));
  if (!arguments) {
    EmitMalformed(length, out);
    return;
  }
  out.tool_calls.push_back(
      {next_index_, id_prefix_ + std::to_string(next_index_), std::string(name), std::move(*arguments)});
  ++next_index_;
  ++stats_.tool_calls;
  stats_.markup_bytes += static_cast<int64_t>(length);
  buffer_.erase(0, length);
  after_call_ = true;
}

std::optional<std::string> GlmToolParser::Arguments(std::string_view name, std::string_view body) const {
  auto fn = types_.find(name);
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  std::set<std::string_view> seen;
  while (!StripSpaces(body).empty()) {
    std::optional<std::string_view> key = TakeTagged(body, kKeyBegin, kKeyEnd);
    if (!key) return std::nullopt;
    std::optional<std::string_view> value = TakeTagged(body, kValueBegin, kValueEnd);
    if (!value) return std::nullopt;
    std::string_view k = StripSpaces(*key);
    if (k.empty() || !seen.insert(k).second) return std::nullopt;
    nlohmann::ordered_json v = std::string(*value);
    if (fn != types_.end()) {
      auto param = fn->second.find(k);
      if (param != fn->second.end() && !param->second) {
        if (auto parsed = internal::ParseJsonValue(StripSpaces(*value))) v = std::move(*parsed);
      }
    }
    args[std::string(k)] = std::move(v);
  }
  return args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void GlmToolParser::EmitMalformed(size_t length, ToolParseDelta& out) {
  out.content.append(buffer_, 0, length);
  buffer_.erase(0, length);
  ++stats_.tool_call_parse_errors;
}

}  // namespace tandem::engine::text
