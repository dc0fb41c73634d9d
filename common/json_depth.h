#pragma once
// A scan for JSON nesting before a parser gets untrusted text (model output, HTTP bodies, the
// Kubernetes API): nlohmann/json's parse, copy, compare and dump recurse once per level, so a deep
// enough document overflows the stack. Header-only, standard library only.

#include <string_view>

namespace tandem {

// False when `text`, read as JSON, nests arrays and objects deeper than `max_depth` (strings and
// their escapes skipped). Exact for a valid JSON text and for every prefix of one, which is all a
// parser reads before it fails.
inline bool JsonDepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace tandem
