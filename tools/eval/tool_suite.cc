#include "tools/eval/tool_suite.h"

#include <fstream>
#include <set>

#include "common/json_depth.h"
#include "tools/eval/json_schema.h"

namespace tandem::tools::eval {
namespace {

using Json = nlohmann::json;

constexpr int kMaxJsonDepth = 64;

// Tool-call markup a server leaves in the content when it could not parse a call (Kimi K2's and
// GLM's call openers): each one is a call the model tried to make.
constexpr const char* kCallMarkers[] = {"<|tool_call_begin|>", "<tool_call>"};

int CountOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

double Ratio(int64_t num, int64_t den) {
  return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : -1;
}

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

}  // namespace

StatusOr<ToolCase> ParseToolCase(const Json& j) {
  if (!j.is_object()) return Bad("a case is not a JSON object");
  ToolCase c;
  if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
    return Bad("id: want a non-empty string");
  c.id = j["id"].get<std::string>();
  const std::string where = "case '" + c.id + "': ";
  c.category = j.value("category", std::string());
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
    return Bad(where + "messages: want a non-empty array");
  for (const Json& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return Bad(where + "messages: every message needs a role");
  }
  c.messages = j["messages"];
  c.tools = j.contains("tools") ? j["tools"] : Json::array();
  if (!c.tools.is_array()) return Bad(where + "tools: want an array");
  for (const Json& t : c.tools) {
    const Json* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (f == nullptr || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
      return Bad(where + "tools: every tool needs function.name");
    const std::string name = (*f)["name"].get<std::string>();
    const Json params = f->contains("parameters") ? (*f)["parameters"] : Json::object();
    if (!params.is_object()) return Bad(where + "tool '" + name + "': parameters is not an object");
    if (!c.parameters.emplace(name, params).second)
      return Bad(where + "tool '" + name + "' is declared twice");
  }
  if (!j.contains("expected") || !j["expected"].is_array()) return Bad(where + "expected: want an array");
  for (const Json& e : j["expected"]) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string())
      return Bad(where + "expected: every call needs a name");
    ExpectedCall call;
    call.name = e["name"].get<std::string>();
    if (c.parameters.count(call.name) == 0)
      return Bad(where + "expected call '" + call.name + "' is not an offered tool");
    call.arguments = e.contains("arguments") ? e["arguments"] : Json::object();
    if (!call.arguments.is_object())
      return Bad(where + "expected call '" + call.name + "': arguments is not an object");
    for (const auto& [name, answers] : call.arguments.items()) {
      if (!answers.is_array() || answers.empty())
        return Bad(where + "expected call '" + call.name + "': argument '" + name +
                   "' wants a non-empty list of values");
    }
    c.expected.push_back(std::move(call));
  }
  return c;
}

StatusOr<std::vector<ToolCase>> LoadToolSuite(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("suite " + path + ": cannot open");
  std::vector<ToolCase> cases;
  std::set<std::string> ids;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string at = path + ":" + std::to_string(n) + ": ";
    if (!JsonDepthWithin(line, kMaxJsonDepth)) return Bad(at + "nested deeper than 64 levels");
    const Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded()) return Bad(at + "not valid JSON");
    StatusOr<ToolCase> c = ParseToolCase(j);
    if (!c.ok()) return Bad(at + c.status().message());
    if (!ids.insert(c->id).second) return Bad(at + "id '" + c->id + "' appears twice");
    cases.push_back(std::move(*c));
  }
  if (cases.empty()) return Bad("suite " + path + ": no cases");
  return cases;
}

Json AnswerToJson(const CaseAnswer& a) {
  Json calls = Json::array();
  for (const RawCall& c : a.tool_calls) calls.push_back({{"name", c.name}, {"arguments", c.arguments}});
  Json j = {{"id", a.id}, {"tool_calls", calls}, {"content", a.content}};
  if (!a.error.empty()) j["error"] = a.error;
  return j;
}

StatusOr<CaseAnswer> AnswerFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) return Bad("an answer needs a string id");
  CaseAnswer a;
  a.id = j["id"].get<std::string>();
  a.content = j.contains("content") && j["content"].is_string() ? j["content"].get<std::string>() : "";
  a.error = j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
  if (j.contains("tool_calls") && !j["tool_calls"].is_null()) {
    if (!j["tool_calls"].is_array()) return Bad("answer '" + a.id + "': tool_calls is not an array");
    for (const Json& c : j["tool_calls"]) {
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string())
        return Bad("answer '" + a.id + "': a tool call needs a name");
      const Json& args = c.contains("arguments") ? c["arguments"] : Json("");
      a.tool_calls.push_back(
          {c["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump()});
    }
  }
  return a;
}

StatusOr<CaseAnswer> AnswerFromChatCompletion(const std::string& id, const Json& response) {
  if (!response.is_object() || !response.contains("choices") || !response["choices"].is_array() ||
      response["choices"].empty() || !response["choices"][0].is_object() ||
      !response["choices"][0].contains("message") || !response["choices"][0]["message"].is_object()) {
    return Bad("the answer has no choices[0].message");
  }
  const Json& m = response["choices"][0]["message"];
  Json flat = {{"id", id},
               {"content", m.contains("content") && m["content"].is_string() ? m["content"] : Json("")}};
  flat["tool_calls"] = Json::array();
  if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
    for (const Json& c : m["tool_calls"]) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
        return Bad("a tool call has no function");
      flat["tool_calls"].push_back(c["function"]);
    }
  }
  return AnswerFromJson(flat);
}

CaseScore ScoreCase(const ToolCase& c, const CaseAnswer& answer) {
  CaseScore s;
  s.id = c.id;
  s.category = c.category;
  s.should_call = !c.expected.empty();
  if (!answer.error.empty()) {
    s.error = answer.error;
    return s;
  }
  s.scored = true;
  std::vector<MadeCall> made;
  bool all_parsed = true;
  for (const RawCall& raw : answer.tool_calls) {
    CallVerdict v;
    v.name = raw.name;
    const Json args = JsonDepthWithin(raw.arguments, kMaxJsonDepth)
                          ? Json::parse(raw.arguments, nullptr, false)
                          : Json(Json::value_t::discarded);
    const auto tool = c.parameters.find(raw.name);
    if (args.is_discarded() || !args.is_object()) {
      v.why = "arguments are not a JSON object";
      all_parsed = false;
    } else if (tool == c.parameters.end()) {
      v.why = "'" + raw.name + "' is not an offered tool";
    } else if (const Status st = ValidateJsonSchema(tool->second, args); !st.ok()) {
      v.why = st.message();
    } else {
      v.valid = true;
    }
    s.valid_calls += v.valid ? 1 : 0;
    s.verdicts.push_back(std::move(v));
    made.push_back({raw.name, args.is_discarded() ? Json() : args});
  }
  for (const char* marker : kCallMarkers) s.malformed_calls += CountOccurrences(answer.content, marker);
  s.calls = static_cast<int>(answer.tool_calls.size()) + s.malformed_calls;
  s.called = s.calls > 0;
  if (!s.should_call) {
    s.correct = !s.called;
    if (!s.correct) s.why = "called a tool where no call was right";
  } else if (s.malformed_calls > 0 || !all_parsed) {
    s.why = "a call did not parse";
  } else {
    const MatchVerdict m = MatchCalls(made, c.expected, c.parameters);
    s.correct = m.match;
    s.why = m.why;
  }
  return s;
}

Json ScoreToJson(const CaseScore& s) {
  Json verdicts = Json::array();
  for (const CallVerdict& v : s.verdicts)
    verdicts.push_back({{"name", v.name}, {"valid", v.valid}, {"why", v.why}});
  return {{"id", s.id},
          {"category", s.category},
          {"scored", s.scored},
          {"error", s.error},
          {"calls", s.calls},
          {"valid_calls", s.valid_calls},
          {"malformed_calls", s.malformed_calls},
          {"should_call", s.should_call},
          {"called", s.called},
          {"correct", s.correct},
          {"why", s.why},
          {"verdicts", verdicts}};
}

ToolMetrics Aggregate(const std::vector<CaseScore>& scores) {
  ToolMetrics m;
  for (const CaseScore& s : scores) {
    ++m.cases;
    if (!s.scored) {
      ++m.failed;
      continue;
    }
    m.calls += s.calls;
    m.valid_calls += s.valid_calls;
    if (s.should_call) {
      ++m.should_call;
      (s.called ? m.true_positive : m.false_negative)++;
      m.correct_calls += s.correct ? 1 : 0;
    } else {
      (s.called ? m.false_positive : m.true_negative)++;
    }
    m.correct += s.correct ? 1 : 0;
  }
  m.validity = Ratio(m.valid_calls, m.calls);
  m.trigger_precision = Ratio(m.true_positive, m.true_positive + m.false_positive);
  m.trigger_recall = Ratio(m.true_positive, m.should_call);
  m.argument_accuracy = Ratio(m.correct_calls, m.should_call);
  m.accuracy = Ratio(m.correct, m.cases - m.failed);
  return m;
}

Json MetricsToJson(const ToolMetrics& m) {
  return {{"cases", m.cases},
          {"failed", m.failed},
          {"calls", m.calls},
          {"valid_calls", m.valid_calls},
          {"true_positive", m.true_positive},
          {"false_positive", m.false_positive},
          {"false_negative", m.false_negative},
          {"true_negative", m.true_negative},
          {"validity", m.validity},
          {"trigger_precision", m.trigger_precision},
          {"trigger_recall", m.trigger_recall},
          {"argument_accuracy", m.argument_accuracy},
          {"accuracy", m.accuracy}};
}

}  // namespace tandem::tools::eval
