#include "engine/text/kimi_tool_parser.h"

#include <algorithm>
#include <initializer_list>

namespace tandem::engine::text {
namespace {

using internal::LeadingSpaces;
using internal::StripSpaces;

// The earliest occurrence at or after `from` of any of `markers` (npos when none).
size_t FindFirst(std::string_view text, size_t from, std::initializer_list<std::string_view> markers) {
  size_t best = std::string_view::npos;
  for (std::string_view m : markers) best = std::min(best, text.find(m, from));
  return best;
}

// "functions.get_weather:0" -> "get_weather"; empty when the id names no function.
std::string_view FunctionName(std::string_view id) {
  if (id.starts_with("functions.")) id.remove_prefix(10);
  size_t colon = id.rfind(':');
  if (colon != std::string_view::npos && colon + 1 < id.size() &&
      std::all_of(id.begin() + colon + 1, id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    id = id.substr(0, colon);
  }
  for (char c : id) {
    if (static_cast<unsigned char>(c) <= ' ') return {};
  }
  return id;
}

}  // namespace

ToolParseDelta KimiToolParser::Feed(std::string_view text) {
  buffer_.append(text);
  ToolParseDelta out;
  Drain(/*at_end=*/false, out);
  return out;
}

ToolParseDelta KimiToolParser::Finish() {
  ToolParseDelta out;
  Drain(/*at_end=*/true, out);
  if (in_section_ && !section_emitted_) {
    // A section that never held anything is the model's text after all.
    out.content += kKimiSectionBegin;
    out.content += section_spaces_;
    stats_.markup_bytes -= static_cast<int64_t>(kKimiSectionBegin.size() + section_spaces_.size());
    ++stats_.tool_call_parse_errors;
  }
  in_section_ = false;
  return out;
}

void KimiToolParser::Drain(bool at_end, ToolParseDelta& out) {
  while (in_section_ ? DrainSection(at_end, out) : DrainContent(at_end, out)) {
  }
}

bool KimiToolParser::DrainContent(bool at_end, ToolParseDelta& out) {
  size_t begin = buffer_.find(kKimiSectionBegin);
  if (begin != std::string::npos) {
    out.content.append(buffer_, 0, begin);
    buffer_.erase(0, begin + kKimiSectionBegin.size());
    stats_.markup_bytes += static_cast<int64_t>(kKimiSectionBegin.size());
    in_section_ = true;
    section_emitted_ = false;
    section_spaces_.clear();
    return true;
  }
  size_t safe = at_end ? buffer_.size() : internal::SafeContentLength(buffer_, kKimiSectionBegin);
  out.content.append(buffer_, 0, safe);
  buffer_.erase(0, safe);
  return false;
}

bool KimiToolParser::DrainSection(bool at_end, ToolParseDelta& out) {
  size_t spaces = LeadingSpaces(buffer_);
  stats_.markup_bytes += static_cast<int64_t>(spaces);
  if (!section_emitted_) section_spaces_.append(buffer_, 0, spaces);
  buffer_.erase(0, spaces);
  std::string_view buf = buffer_;
  if (buf.empty()) return false;
  if (buf.starts_with(kKimiSectionEnd)) {
    stats_.markup_bytes += static_cast<int64_t>(kKimiSectionEnd.size());
    buffer_.erase(0, kKimiSectionEnd.size());
    in_section_ = false;
    return true;
  }
  if (buf.starts_with(kKimiSectionBegin)) {  // nested section: the marker is text
    EmitMalformed(kKimiSectionBegin.size(), out);
    return true;
  }
  if (buf.starts_with(kKimiCallBegin)) {
    size_t stop = FindFirst(buf, kKimiCallBegin.size(),
                            {kKimiCallEnd, kKimiCallBegin, kKimiSectionEnd, kKimiSectionBegin});
    if (stop == std::string_view::npos) {
      if (at_end) EmitMalformed(buf.size(), out);  // no end marker before the stream ended
      return at_end;
    }
    if (buf.compare(stop, kKimiCallEnd.size(), kKimiCallEnd) == 0) {
      EmitCall(buf.substr(0, stop + kKimiCallEnd.size()), out);
      buffer_.erase(0, stop + kKimiCallEnd.size());
    } else {
      EmitMalformed(stop, out);  // another marker before this call's end
    }
    return true;
  }
  // Stray text inside the section: content up to the next marker that could resume the section
  // (held back until one arrives, so the result does not depend on the split).
  size_t stop = FindFirst(buf, 0, {kKimiCallBegin, kKimiSectionEnd, kKimiSectionBegin});
  if (stop == std::string_view::npos && !at_end) return false;
  EmitMalformed(stop == std::string_view::npos ? buf.size() : stop, out);
  return true;
}

void KimiToolParser::EmitCall(std::string_view text, ToolParseDelta& out) {
  std::string_view inner =
      text.substr(kKimiCallBegin.size(), text.size() - kKimiCallBegin.size() - kKimiCallEnd.size());
  size_t arg = inner.find(kKimiArgumentBegin);
  std::string_view id =
      arg == std::string_view::npos ? std::string_view() : StripSpaces(inner.substr(0, arg));
  std::string_view name = FunctionName(id);
  std::string_view args = arg == std::string_view::npos
                              ? std::string_view()
                              : StripSpaces(inner.substr(arg + kKimiArgumentBegin.size()));
  std::optional<nlohmann::ordered_json> parsed;
  if (!name.empty()) parsed = internal::ParseJsonValue(args);
  if (!parsed || !parsed->is_object()) {
    out.content += text;
    ++stats_.tool_call_parse_errors;
    section_emitted_ = true;
    return;
  }
  out.tool_calls.push_back({next_index_++, std::string(id), std::string(name), std::string(args)});
  stats_.markup_bytes += static_cast<int64_t>(text.size());
  ++stats_.tool_calls;
  section_emitted_ = true;
}

void KimiToolParser::EmitMalformed(size_t length, ToolParseDelta& out) {
  out.content.append(buffer_, 0, length);
  buffer_.erase(0, length);
  ++stats_.tool_call_parse_errors;
  section_emitted_ = true;
}

}  // namespace tandem::engine::text
