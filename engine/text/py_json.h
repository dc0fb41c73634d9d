#pragma once
// JSON as the models' Jinja chat templates print it. Hugging Face renders `x | tojson` with
// Python's json.dumps(x, ensure_ascii=False) — keys in insertion order, ", " and ": " separators
// unless the template passes its own — so the prompt bytes depend on both. nlohmann::ordered_json
// keeps insertion order; these helpers add Python's separators and never throw.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tandem::engine::text {

// Parses one JSON document keeping object keys in document order. Errors are InvalidArgument
// with nlohmann's position; `what` names the field in the message ("tools[0]").
StatusOr<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, std::string_view what);

struct PyJsonSeparators {
  std::string_view item = ", ";
  std::string_view key = ": ";
};
inline constexpr PyJsonSeparators kPyDefaultSeparators{", ", ": "};
inline constexpr PyJsonSeparators kPyCompactSeparators{",", ":"};

// json.dumps(value, ensure_ascii=False, separators=...) for values nlohmann can hold. Strings
// escape only '"', '\\' and control characters (as Python does); invalid UTF-8 is replaced with
// U+FFFD instead of throwing. Numbers use nlohmann's shortest round-trip form, which matches
// Python for integers and ordinary floats; integers beyond 64 bits and some exponent forms may
// differ (Python keeps big integers exact).
std::string PyJsonDumps(const nlohmann::ordered_json& value, PyJsonSeparators separators);

}  // namespace tandem::engine::text
