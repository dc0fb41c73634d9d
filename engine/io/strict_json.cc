#include "engine/io/strict_json.h"

#include <exception>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tandem::engine::io {

StatusOr<nlohmann::json> ParseStrictJson(std::string_view text) {
  using nlohmann::json;
  // One key set per open object; the callback sees keys before their values.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  json::parser_callback_t track_keys = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open_objects.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!duplicate && !open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get_ref<const std::string&>()).second) {
          duplicate = parsed.get_ref<const std::string&>();
        }
        break;
      default: break;
    }
    return true;
  };
  try {
    json value = json::parse(text.begin(), text.end(), track_keys, /*allow_exceptions=*/true);
    if (duplicate) return Status::DataLoss("duplicate key '" + *duplicate + "'");
    return value;
  } catch (const json::exception& e) {
    return Status::DataLoss(std::string("invalid JSON: ") + e.what());
  } catch (const std::exception& e) {
    return Status::ResourceExhausted(std::string("parsing JSON: ") + e.what());
  }
}

}  // namespace tandem::engine::io
