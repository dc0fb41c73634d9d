#include "tools/eval/json_schema.h"

#include <cmath>
#include <string_view>
#include <vector>

namespace tandem::tools::eval {
namespace {

using Json = nlohmann::json;

constexpr int kMaxSchemaDepth = 64;

std::string Short(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

Status Fail(const std::string& path, const std::string& what) {
  return Status::InvalidArgument(path + ": " + what);
}

Status BadSchema(const std::string& path, const std::string& what) {
  return Status::InvalidArgument("schema at " + path + ": " + what);
}

// Code points of a UTF-8 string (continuation bytes are not counted).
int64_t CodePoints(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool IsType(const Json& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

bool KnownType(std::string_view t) {
  return t == "object" || t == "array" || t == "string" || t == "boolean" || t == "null" || t == "number" ||
         t == "integer";
}

class Validator {
 public:
  Status Check(const Json& schema, const Json& v, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) return BadSchema(path, "nested deeper than 64 levels");
    if (schema.is_boolean())
      return schema.get<bool>() ? Status::Ok() : Fail(path, "no value is allowed here");
    if (!schema.is_object()) return BadSchema(path, "not an object or boolean");
    RETURN_IF_ERROR(CheckType(schema, v, path));
    if (const auto it = schema.find("enum"); it != schema.end()) {
      if (!it->is_array()) return BadSchema(path, "enum is not an array");
      bool found = false;
      for (const Json& e : *it) found = found || JsonSchemaEqual(e, v);
      if (!found) return Fail(path, Short(v) + " is not one of " + Short(*it));
    }
    if (const auto it = schema.find("const"); it != schema.end() && !JsonSchemaEqual(*it, v)) {
      return Fail(path, Short(v) + " is not " + Short(*it));
    }
    if (v.is_object()) RETURN_IF_ERROR(CheckObject(schema, v, path, depth));
    if (v.is_array()) RETURN_IF_ERROR(CheckArray(schema, v, path, depth));
    if (v.is_number()) RETURN_IF_ERROR(CheckNumber(schema, v, path));
    if (v.is_string()) RETURN_IF_ERROR(CheckString(schema, v, path));
    return CheckCombinators(schema, v, path, depth);
  }

 private:
  static Status CheckType(const Json& schema, const Json& v, const std::string& path) {
    const auto it = schema.find("type");
    if (it == schema.end()) return Status::Ok();
    std::vector<std::string> types;
    if (it->is_string()) {
      types.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const Json& t : *it) {
        if (!t.is_string()) return BadSchema(path, "type list holds a non-string");
        types.push_back(t.get<std::string>());
      }
    } else {
      return BadSchema(path, "type is neither a string nor a list");
    }
    for (const std::string& t : types) {
      if (!KnownType(t)) return BadSchema(path, "unknown type '" + t + "'");
      if (IsType(v, t)) return Status::Ok();
    }
    return Fail(path, Short(v) + " is not of type " + Short(*it));
  }

  Status CheckObject(const Json& schema, const Json& v, const std::string& path, int depth) {
    const Json* props = nullptr;
    if (const auto it = schema.find("properties"); it != schema.end()) {
      if (!it->is_object()) return BadSchema(path, "properties is not an object");
      props = &*it;
    }
    if (const auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array()) return BadSchema(path, "required is not an array");
      for (const Json& name : *it) {
        if (!name.is_string()) return BadSchema(path, "required holds a non-string");
        if (!v.contains(name.get<std::string>())) {
          return Fail(path, "missing required property '" + name.get<std::string>() + "'");
        }
      }
    }
    const auto extra = schema.find("additionalProperties");
    for (const auto& [key, value] : v.items()) {
      const std::string at = path + "." + key;
      if (props != nullptr && props->contains(key)) {
        RETURN_IF_ERROR(Check((*props)[key], value, at, depth + 1));
      } else if (extra != schema.end()) {
        if (extra->is_boolean() && !extra->get<bool>()) {
          return Fail(path, "property '" + key + "' is not allowed");
        }
        RETURN_IF_ERROR(Check(*extra, value, at, depth + 1));
      }
    }
    return Status::Ok();
  }

  Status CheckArray(const Json& schema, const Json& v, const std::string& path, int depth) {
    const int64_t n = static_cast<int64_t>(v.size());
    if (const auto it = schema.find("minItems");
        it != schema.end() && it->is_number() && n < it->get<double>()) {
      return Fail(path, "has " + std::to_string(n) + " items, fewer than " + Short(*it));
    }
    if (const auto it = schema.find("maxItems");
        it != schema.end() && it->is_number() && n > it->get<double>()) {
      return Fail(path, "has " + std::to_string(n) + " items, more than " + Short(*it));
    }
    if (const auto it = schema.find("uniqueItems");
        it != schema.end() && it->is_boolean() && it->get<bool>()) {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = i + 1; j < v.size(); ++j) {
          if (JsonSchemaEqual(v[i], v[j]))
            return Fail(path, "items " + std::to_string(i) + " and " + std::to_string(j) + " are equal");
        }
      }
    }
    if (const auto it = schema.find("items"); it != schema.end()) {
      if (!it->is_object() && !it->is_boolean()) return BadSchema(path, "items is not a schema");
      for (size_t i = 0; i < v.size(); ++i) {
        RETURN_IF_ERROR(Check(*it, v[i], path + "[" + std::to_string(i) + "]", depth + 1));
      }
    }
    return Status::Ok();
  }

  static Status CheckNumber(const Json& schema, const Json& v, const std::string& path) {
    const double x = v.get<double>();
    auto bound = [&](const char* key, auto ok, const char* words) -> Status {
      const auto it = schema.find(key);
      if (it == schema.end() || !it->is_number()) return Status::Ok();
      return ok(x, it->template get<double>()) ? Status::Ok()
                                               : Fail(path, Short(v) + " is " + words + " " + Short(*it));
    };
    RETURN_IF_ERROR(bound(
        "minimum", [](double a, double b) { return a >= b; }, "less than the minimum"));
    RETURN_IF_ERROR(bound(
        "maximum", [](double a, double b) { return a <= b; }, "more than the maximum"));
    RETURN_IF_ERROR(bound(
        "exclusiveMinimum", [](double a, double b) { return a > b; }, "not above the exclusive minimum"));
    return bound(
        "exclusiveMaximum", [](double a, double b) { return a < b; }, "not below the exclusive maximum");
  }

  static Status CheckString(const Json& schema, const Json& v, const std::string& path) {
    const int64_t n = CodePoints(v.get<std::string>());
    if (const auto it = schema.find("minLength");
        it != schema.end() && it->is_number() && n < it->get<double>()) {
      return Fail(path, Short(v) + " is shorter than " + Short(*it));
    }
    if (const auto it = schema.find("maxLength");
        it != schema.end() && it->is_number() && n > it->get<double>()) {
      return Fail(path, Short(v) + " is longer than " + Short(*it));
    }
    return Status::Ok();
  }

  Status CheckCombinators(const Json& schema, const Json& v, const std::string& path, int depth) {
    auto list = [&](const char* key) -> StatusOr<const Json*> {
      const auto it = schema.find(key);
      if (it == schema.end()) return static_cast<const Json*>(nullptr);
      if (!it->is_array() || it->empty())
        return BadSchema(path, std::string(key) + " is not a non-empty array");
      return &*it;
    };
    ASSIGN_OR_RETURN(const Json* all, list("allOf"));
    if (all != nullptr) {
      for (const Json& s : *all) RETURN_IF_ERROR(Check(s, v, path, depth + 1));
    }
    ASSIGN_OR_RETURN(const Json* any, list("anyOf"));
    if (any != nullptr) {
      int passed = 0;
      for (const Json& s : *any) {
        const Status st = Check(s, v, path, depth + 1);
        if (st.ok()) ++passed;
      }
      if (passed == 0) return Fail(path, Short(v) + " matches none of anyOf");
    }
    ASSIGN_OR_RETURN(const Json* one, list("oneOf"));
    if (one != nullptr) {
      int passed = 0;
      for (const Json& s : *one) passed += Check(s, v, path, depth + 1).ok() ? 1 : 0;
      if (passed != 1)
        return Fail(path, Short(v) + " matches " + std::to_string(passed) + " of oneOf, not exactly one");
    }
    if (const auto it = schema.find("not"); it != schema.end() && Check(*it, v, path, depth + 1).ok()) {
      return Fail(path, Short(v) + " matches the schema under not");
    }
    return Status::Ok();
  }
};

}  // namespace

bool JsonSchemaEqual(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
    if (a.is_number_unsigned() || b.is_number_unsigned()) {
      const Json& u = a.is_number_unsigned() ? a : b;
      const Json& s = a.is_number_unsigned() ? b : a;
      return s.get<int64_t>() >= 0 && static_cast<uint64_t>(s.get<int64_t>()) == u.get<uint64_t>();
    }
    return a.get<int64_t>() == b.get<int64_t>();
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!JsonSchemaEqual(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      const auto it = b.find(key);
      if (it == b.end() || !JsonSchemaEqual(value, *it)) return false;
    }
    return true;
  }
  return a == b;
}

Status ValidateJsonSchema(const Json& schema, const Json& value) {
  try {
    return Validator().Check(schema, value, "$", 0);
  } catch (const std::exception& e) {  // nlohmann's get<> on an unexpected type: a bad schema
    return Status::InvalidArgument(std::string("schema: ") + e.what());
  }
}

}  // namespace tandem::tools::eval
