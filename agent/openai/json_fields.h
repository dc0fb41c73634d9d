#pragma once
// Internal to agent/openai: typed, range-checked reads of request fields, recording the first
// error as an OpenAI 400 that names the field. Every read is a no-op once an error is recorded,
// so a parser can read all its fields and check ok() once. Never throws.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "agent/openai/api.h"

namespace tandem::agent::openai::internal {

using Json = nlohmann::ordered_json;

// Parses `body`, refusing nesting deeper than `max_depth` before any DOM is built (a 1 MB
// "[[[[..." must not exhaust the stack). Errors: 400 "invalid JSON: ...", 400 for the depth.
std::variant<Json, ApiError> ParseBody(std::string_view body, int max_depth);

// A 400 invalid_request_error naming `param` (may be empty).
ApiError BadRequest(std::string message, std::string param = "");

// An interval of numbers, printed in messages as "[0, 2]" or "(0, 1]".
struct Range {
  double lo = 0;
  double hi = 0;
  bool lo_open = false;
};

class FieldReader {
 public:
  // REQUIRES: `object` is a JSON object that outlives the reader. `prefix` is prepended to
  // param names ("messages[2]." for a message's fields).
  FieldReader(const Json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  bool ok() const { return !failed_; }
  const ApiError& error() const { return error_; }
  // Records an error for `key` (first one wins).
  void Fail(std::string_view key, std::string message);
  // Records the error of a nested reader as it is (its param already names the inner field).
  void Adopt(const FieldReader& inner);

  // The field, or nullptr when absent or JSON null ("not set").
  const Json* Find(std::string_view key) const;
  // The param name of `key`: prefix + key.
  std::string Param(std::string_view key) const { return prefix_ + std::string(key); }

  // Each returns true when the field was set and valid (then *out is written); false when it is
  // absent, null or invalid (an invalid one records an error).
  bool Number(std::string_view key, Range range, float* out);
  bool Int(std::string_view key, int64_t lo, int64_t hi, int32_t* out);
  bool Bool(std::string_view key, bool* out);
  bool String(std::string_view key, std::string* out);
  // As String, but absent or null is an error too.
  bool RequiredString(std::string_view key, std::string* out);
  // An object (returned), or nullptr when absent, null or not an object (an error).
  const Json* Object(std::string_view key);
  // An array (returned), or nullptr when absent, null or not an array (an error).
  const Json* Array(std::string_view key);

 private:
  const Json& object_;
  std::string prefix_;
  bool failed_ = false;
  ApiError error_;
};

// An integer-valued JSON number (also 3.0) that fits in [lo, hi].
bool AsInt(const Json& value, int64_t lo, int64_t hi, int64_t* out);

}  // namespace tandem::agent::openai::internal
