#include "agent/openai/json_fields.h"

#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>

#include "common/json_depth.h"

namespace tandem::agent::openai::internal {
namespace {

std::string FormatNumber(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

// nlohmann's what() starts with "[json.exception.parse_error.101] "; clients need only the rest.
std::string_view StripExceptionId(std::string_view what) {
  if (what.starts_with("[json.exception.")) {
    size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return what;
}

}  // namespace

std::variant<Json, ApiError> ParseBody(std::string_view body, int max_depth) {
  if (!JsonDepthWithin(body, max_depth)) {
    return BadRequest("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  }
  try {
    return Json::parse(body.begin(), body.end());
  } catch (const std::exception& e) {
    return BadRequest("invalid JSON: " + std::string(StripExceptionId(e.what())));
  }
}

ApiError BadRequest(std::string message, std::string param) {
  ApiError error;
  error.status = 400;
  error.message = std::move(message);
  error.param = std::move(param);
  return error;
}

bool AsInt(const Json& value, int64_t lo, int64_t hi, int64_t* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(v);
  } else if (value.is_number_integer()) {
    *out = value.get<int64_t>();
  } else if (value.is_number_float()) {
    double v = value.get<double>();
    // 2^63 is the first double outside int64; whole floats ("max_tokens": 5.0) are accepted.
    if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) >= 9.2e18) return false;
    *out = static_cast<int64_t>(v);
  } else {
    return false;
  }
  return *out >= lo && *out <= hi;
}

void FieldReader::Fail(std::string_view key, std::string message) {
  if (failed_) return;
  failed_ = true;
  error_ = BadRequest(std::move(message), Param(key));
}

void FieldReader::Adopt(const FieldReader& inner) {
  if (failed_ || inner.ok()) return;
  failed_ = true;
  error_ = inner.error();
}

const Json* FieldReader::Find(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::Number(std::string_view key, Range range, float* out) {
  const Json* v = failed_ ? nullptr : Find(key);
  if (v == nullptr) return false;
  double d = v->is_number() ? v->get<double>() : std::nan("");
  bool low_ok = range.lo_open ? d > range.lo : d >= range.lo;
  if (!v->is_number() || !low_ok || !(d <= range.hi)) {
    Fail(key, "'" + Param(key) + "' must be a number in " + (range.lo_open ? "(" : "[") +
                  FormatNumber(range.lo) + ", " + FormatNumber(range.hi) + "]");
    return false;
  }
  *out = static_cast<float>(d);
  return true;
}

bool FieldReader::Int(std::string_view key, int64_t lo, int64_t hi, int32_t* out) {
  const Json* v = failed_ ? nullptr : Find(key);
  if (v == nullptr) return false;
  int64_t i = 0;
  if (!AsInt(*v, lo, hi, &i)) {
    Fail(key, "'" + Param(key) + "' must be an integer in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
    return false;
  }
  *out = static_cast<int32_t>(i);
  return true;
}

bool FieldReader::Bool(std::string_view key, bool* out) {
  const Json* v = failed_ ? nullptr : Find(key);
  if (v == nullptr) return false;
  if (!v->is_boolean()) {
    Fail(key, "'" + Param(key) + "' must be a boolean");
    return false;
  }
  *out = v->get<bool>();
  return true;
}

bool FieldReader::String(std::string_view key, std::string* out) {
  const Json* v = failed_ ? nullptr : Find(key);
  if (v == nullptr) return false;
  if (!v->is_string()) {
    Fail(key, "'" + Param(key) + "' must be a string");
    return false;
  }
  *out = v->get<std::string>();
  return true;
}

bool FieldReader::RequiredString(std::string_view key, std::string* out) {
  if (failed_) return false;
  if (Find(key) == nullptr) {
    Fail(key, "'" + Param(key) + "' is required");
    return false;
  }
  return String(key, out);
}

const Json* FieldReader::Object(std::string_view key) {
  const Json* v = failed_ ? nullptr : Find(key);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    Fail(key, "'" + Param(key) + "' must be an object");
    return nullptr;
  }
  return v;
}

const Json* FieldReader::Array(std::string_view key) {
  const Json* v = failed_ ? nullptr : Find(key);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    Fail(key, "'" + Param(key) + "' must be an array");
    return nullptr;
  }
  return v;
}

}  // namespace tandem::agent::openai::internal
