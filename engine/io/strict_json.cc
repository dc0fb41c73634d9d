#include "engine/io/strict_json.h"

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace tandem::engine::io {
namespace {

using nlohmann::json;

// A SAX pass that only looks for duplicate keys. A callback parser would do it in the same pass,
// but nlohmann's callback parser rescans the parent object at every closing brace, which made a
// header of n tensors cost O(n^2); two linear passes are much cheaper.
class DuplicateKeyFinder final : public nlohmann::json_sax<json> {
 public:
  std::optional<std::string> duplicate;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_objects_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open_objects_.empty() && !open_objects_.back().insert(k).second) {
      duplicate = k;
      return false;  // stop: the document is rejected anyway
    }
    return true;
  }
  bool end_object() override {
    if (!open_objects_.empty()) open_objects_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  std::vector<std::unordered_set<std::string>> open_objects_;
};

}  // namespace

StatusOr<nlohmann::json> ParseStrictJson(std::string_view text) {
  try {
    json value = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/true);
    DuplicateKeyFinder finder;
    json::sax_parse(text.begin(), text.end(), &finder);
    if (finder.duplicate) return Status::DataLoss("duplicate key '" + *finder.duplicate + "'");
    return value;
  } catch (const json::exception& e) {
    return Status::DataLoss(std::string("invalid JSON: ") + e.what());
  } catch (const std::exception& e) {
    return Status::ResourceExhausted(std::string("parsing JSON: ") + e.what());
  }
}

}  // namespace tandem::engine::io
