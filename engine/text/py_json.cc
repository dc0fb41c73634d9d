#include "engine/text/py_json.h"

#include <exception>
#include <string>

namespace tandem::engine::text {
namespace {

using nlohmann::ordered_json;

void Write(const ordered_json& value, PyJsonSeparators sep, std::string& out) {
  switch (value.type()) {
    case ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += sep.item;
        first = false;
        out += ordered_json(key).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
        out += sep.key;
        Write(item, sep, out);
      }
      out += '}';
      return;
    }
    case ordered_json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += sep.item;
        Write(value[i], sep, out);
      }
      out += ']';
      return;
    }
    default:
      // Scalars: nlohmann's escaping of strings (", \, \b \f \n \r \t, other controls as \u00xx)
      // is Python's ensure_ascii=False escaping.
      out += value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
      return;
  }
}

}  // namespace

StatusOr<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, std::string_view what) {
  try {
    return ordered_json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string(what) + ": invalid JSON: " + e.what());
  }
}

std::string PyJsonDumps(const nlohmann::ordered_json& value, PyJsonSeparators separators) {
  std::string out;
  Write(value, separators, out);
  return out;
}

}  // namespace tandem::engine::text
