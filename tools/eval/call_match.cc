#include "tools/eval/call_match.h"

#include <cctype>
#include <optional>

#include "tools/eval/json_schema.h"

namespace tandem::tools::eval {
namespace {

using Json = nlohmann::json;

// The value kinds BFCL's checker compares by (Python's types after json.loads).
enum class Kind { kInt, kFloat, kString, kBool, kList, kDict, kNull };

Kind KindOf(const Json& v) {
  if (v.is_boolean()) return Kind::kBool;
  if (v.is_number_integer()) return Kind::kInt;
  if (v.is_number_float()) return Kind::kFloat;
  if (v.is_string()) return Kind::kString;
  if (v.is_array()) return Kind::kList;
  if (v.is_object()) return Kind::kDict;
  return Kind::kNull;
}

// The kind a declared JSON Schema type asks for; nullopt for no type (anything goes).
std::optional<Kind> KindOfType(const Json& schema) {
  if (!schema.is_object() || !schema.contains("type") || !schema["type"].is_string()) return std::nullopt;
  const std::string t = schema["type"].get<std::string>();
  if (t == "integer") return Kind::kInt;
  if (t == "number") return Kind::kFloat;
  if (t == "string") return Kind::kString;
  if (t == "boolean") return Kind::kBool;
  if (t == "array") return Kind::kList;
  if (t == "object") return Kind::kDict;
  if (t == "null") return Kind::kNull;
  return std::nullopt;
}

bool IsOptionalMarker(const Json& v) { return v.is_string() && v.get<std::string>().empty(); }

// A string standardised; anything else as it is.
Json Standardized(const Json& v) { return v.is_string() ? Json(StandardizeString(v.get<std::string>())) : v; }

bool AnyEqual(const Json& value, const Json& answers) {
  for (const Json& a : answers) {
    if (JsonSchemaEqual(value, a)) return true;
  }
  return false;
}

// One dictionary against the listed dictionaries: its keys among the answer's, each value (strings
// standardised) among that key's answers, and every key the answer does not mark optional present.
bool DictMatches(const Json& value, const Json& answers) {
  for (const Json& answer : answers) {
    if (!answer.is_object()) continue;  // "" (the argument may be absent): not a dictionary to match
    bool ok = true;
    for (const auto& [key, v] : value.items()) {
      if (!answer.contains(key) || !answer[key].is_array()) {
        ok = false;
        break;
      }
      Json listed = Json::array();
      for (const Json& a : answer[key]) listed.push_back(Standardized(a));
      if (!AnyEqual(Standardized(v), listed)) {
        ok = false;
        break;
      }
    }
    for (const auto& [key, listed] : answer.items()) {
      if (!ok) break;
      bool optional = false;
      if (listed.is_array()) {
        for (const Json& a : listed) optional = optional || IsOptionalMarker(a);
      }
      if (!value.contains(key) && !optional) ok = false;
    }
    if (ok) return true;
  }
  return false;
}

// A list of dictionaries against lists of dictionaries, position by position.
bool ListOfDictsMatches(const Json& value, const Json& answers) {
  for (const Json& answer : answers) {
    if (!answer.is_array() || answer.size() != value.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < value.size() && ok; ++i) {
      ok = value[i].is_object() && DictMatches(value[i], Json::array({answer[i]}));
    }
    if (ok) return true;
  }
  return false;
}

bool ListMatches(const Json& value, const Json& answers) {
  Json got = Json::array();
  for (const Json& v : value) got.push_back(Standardized(v));
  for (const Json& answer : answers) {
    if (!answer.is_array()) continue;
    Json want = Json::array();
    for (const Json& a : answer) want.push_back(Standardized(a));
    if (JsonSchemaEqual(got, want)) return true;
  }
  return false;
}

// The kind of the first listed answer that is not "" (the argument's value kind the answer
// expects); nullopt when every answer is "".
std::optional<Kind> AnswerKind(const Json& answers) {
  for (const Json& a : answers) {
    if (!IsOptionalMarker(a)) return KindOf(a);
  }
  return std::nullopt;
}

// One argument: its type as declared (or as the answers have it, BFCL's "variable" case), then
// its value. Empty string on a match, else why not.
std::string CheckArgument(const std::string& name, Json value, const Json& schema, const Json& answers) {
  const std::optional<Kind> declared = KindOfType(schema);
  // An integer where a number is declared counts as that number.
  if (declared == Kind::kFloat && value.is_number_integer()) value = Json(value.get<double>());
  const std::optional<Kind> answer_kind = AnswerKind(answers);
  bool variable = answer_kind.has_value() && declared.has_value() && *answer_kind != *declared;
  const Kind kind = KindOf(value);
  if (declared.has_value() && kind != *declared) {
    if (!answer_kind.has_value() || kind != *answer_kind) return "argument '" + name + "' has the wrong type";
    variable = true;
  } else if (declared == Kind::kList && schema.contains("items")) {
    // Elements of the declared item type, for at least one listed answer (BFCL checks one level).
    const std::optional<Kind> item = KindOfType(schema["items"]);
    bool some = false;
    for (const Json& a : answers) {
      bool ok = true;
      if (a.is_array() && item.has_value()) {
        const std::optional<Kind> listed = AnswerKind(a);  // an element may take the answer's kind
        for (const Json& v : value) ok = ok && (KindOf(v) == *item || KindOf(v) == listed);
      }
      some = some || ok;
    }
    if (!some) return "argument '" + name + "' has items of the wrong type";
  }
  bool matched = false;
  if (variable || !declared.has_value()) {
    matched = AnyEqual(value, answers);
  } else if (*declared == Kind::kDict) {
    matched = DictMatches(value, answers);
  } else if (*declared == Kind::kList && schema.contains("items") &&
             KindOfType(schema["items"]) == Kind::kDict) {
    matched = ListOfDictsMatches(value, answers);
  } else if (*declared == Kind::kString) {
    Json listed = Json::array();
    for (const Json& a : answers) {
      if (a.is_string()) listed.push_back(Standardized(a));
    }
    matched = AnyEqual(Standardized(value), listed);
  } else if (*declared == Kind::kList) {
    matched = ListMatches(value, answers);
  } else {
    matched = AnyEqual(value, answers);
  }
  return matched ? "" : "argument '" + name + "' = " + value.dump() + " is not among " + answers.dump();
}

// One call against one expected call. Empty string on a match, else why not.
std::string CheckCall(const MadeCall& call, const ExpectedCall& want,
                      const std::map<std::string, Json>& tools) {
  if (call.name != want.name) return "called '" + call.name + "', not '" + want.name + "'";
  const auto tool = tools.find(want.name);
  const Json parameters = tool == tools.end() ? Json::object() : tool->second;
  const Json properties =
      parameters.is_object() && parameters.contains("properties") && parameters["properties"].is_object()
          ? parameters["properties"]
          : Json::object();
  if (!call.arguments.is_object()) return "arguments are not an object";
  if (parameters.is_object() && parameters.contains("required") && parameters["required"].is_array()) {
    for (const Json& r : parameters["required"]) {
      if (r.is_string() && !call.arguments.contains(r.get<std::string>())) {
        return "required argument '" + r.get<std::string>() + "' is missing";
      }
    }
  }
  for (const auto& [name, value] : call.arguments.items()) {
    if (!properties.contains(name) || !want.arguments.contains(name) || !want.arguments[name].is_array()) {
      return "unexpected argument '" + name + "'";
    }
    std::string why = CheckArgument(name, value, properties[name], want.arguments[name]);
    if (!why.empty()) return why;
  }
  for (const auto& [name, answers] : want.arguments.items()) {
    if (call.arguments.contains(name)) continue;
    bool optional = false;
    if (answers.is_array()) {
      for (const Json& a : answers) optional = optional || IsOptionalMarker(a);
    }
    if (!optional) return "argument '" + name + "' is missing";
  }
  return "";
}

}  // namespace

std::string StandardizeString(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case ' ':
      case ',':
      case '.':
      case '/':
      case '-':
      case '_':
      case '*':
      case '^': break;
      case '\'': out.push_back('"'); break;
      default: out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

MatchVerdict MatchCalls(const std::vector<MadeCall>& calls, const std::vector<ExpectedCall>& expected,
                        const std::map<std::string, Json>& tools) {
  if (calls.size() != expected.size()) {
    return {false,
            "made " + std::to_string(calls.size()) + " calls, expected " + std::to_string(expected.size())};
  }
  // Each expected call takes the first call not yet taken that answers it (BFCL's order-free
  // parallel check).
  std::vector<bool> taken(calls.size(), false);
  for (size_t e = 0; e < expected.size(); ++e) {
    std::string why = "no call answers expected call " + std::to_string(e);
    bool found = false;
    for (size_t c = 0; c < calls.size() && !found; ++c) {
      if (taken[c]) continue;
      const std::string miss = CheckCall(calls[c], expected[e], tools);
      if (miss.empty()) {
        taken[c] = found = true;
      } else {
        why += " (call " + std::to_string(c) + ": " + miss + ")";
      }
    }
    if (!found) return {false, why};
  }
  return {true, ""};
}

}  // namespace tandem::tools::eval
