// Scoring of hand-made answers: a valid call, invalid JSON, a schema violation, a wrong tool, no
// call, an extra call, parallel calls in either order, markup the server could not parse, and the
// metrics over them. (BFCL's own checker judges the same answers in test_eval_bfcl_checker.py.)
#include "tools/eval/tool_suite.h"

#include <gtest/gtest.h>

#include "tools/eval/json_schema.h"

namespace tandem::tools::eval {
namespace {

using Json = nlohmann::json;

const char* kWeatherTool = R"({"type":"function","function":{"name":"get_weather","parameters":{
  "type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},
  "days":{"type":"integer","minimum":1,"maximum":14}},"required":["city"]}}})";
const char* kTimeTool = R"({"type":"function","function":{"name":"get_time","parameters":{
  "type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}})";

ToolCase Case(const std::string& expected) {
  const Json j = {{"id", "c"},
                  {"category", "simple"},
                  {"messages", Json::array({{{"role", "user"}, {"content", "weather?"}}})},
                  {"tools", Json::array({Json::parse(kWeatherTool), Json::parse(kTimeTool)})},
                  {"expected", Json::parse(expected)}};
  StatusOr<ToolCase> c = ParseToolCase(j);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

CaseAnswer Answer(std::vector<RawCall> calls, std::string content = "") {
  CaseAnswer a;
  a.id = "c";
  a.tool_calls = std::move(calls);
  a.content = std::move(content);
  return a;
}

const char* kParis = R"([{"name":"get_weather","arguments":{"city":["Paris"],"unit":["celsius",""]}}])";

TEST(ToolScoreTest, AValidRightCall) {
  const CaseScore s =
      ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city":"paris","unit":"celsius"})"}}));
  EXPECT_TRUE(s.correct) << s.why;
  EXPECT_EQ(s.valid_calls, 1);
  EXPECT_TRUE(s.called);
  // The optional unit left out is right too; another city is valid but wrong.
  EXPECT_TRUE(ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city":"Paris"})"}})).correct);
  const CaseScore lyon = ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city":"Lyon"})"}}));
  EXPECT_FALSE(lyon.correct);
  EXPECT_EQ(lyon.valid_calls, 1);
}

TEST(ToolScoreTest, InvalidJsonIsAnInvalidCall) {
  const CaseScore s = ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city": "Paris")"}}));
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.valid_calls, 0);
  EXPECT_FALSE(s.correct);
  EXPECT_EQ(s.verdicts[0].why, "arguments are not a JSON object");
}

TEST(ToolScoreTest, SchemaViolationsAreInvalid) {
  for (const char* args :
       {R"({"unit":"celsius"})", R"({"city":"Paris","unit":"kelvin"})", R"({"city":"Paris","days":0})",
        R"({"city":7})", R"({"city":"Paris","days":2.5})"}) {
    const CaseScore s = ScoreCase(Case(kParis), Answer({{"get_weather", args}}));
    EXPECT_EQ(s.valid_calls, 0) << args;
    EXPECT_FALSE(s.correct) << args;
  }
}

TEST(ToolScoreTest, WrongToolAndUnknownTool) {
  const CaseScore wrong = ScoreCase(Case(kParis), Answer({{"get_time", R"({"zone":"CET"})"}}));
  EXPECT_EQ(wrong.valid_calls, 1);  // a valid call, of the wrong tool
  EXPECT_FALSE(wrong.correct);
  const CaseScore unknown = ScoreCase(Case(kParis), Answer({{"get_wether", R"({"city":"Paris"})"}}));
  EXPECT_EQ(unknown.valid_calls, 0);
  EXPECT_FALSE(unknown.correct);
}

TEST(ToolScoreTest, NoCallAndExtraCall) {
  const CaseScore none = ScoreCase(Case(kParis), Answer({}, "It is sunny."));
  EXPECT_FALSE(none.called);
  EXPECT_FALSE(none.correct);
  const CaseScore extra = ScoreCase(
      Case(kParis), Answer({{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"zone":"CET"})"}}));
  EXPECT_EQ(extra.valid_calls, 2);
  EXPECT_FALSE(extra.correct);
  // Where no call is right, none is correct and any call is not.
  EXPECT_TRUE(ScoreCase(Case("[]"), Answer({}, "Hello")).correct);
  EXPECT_FALSE(ScoreCase(Case("[]"), Answer({{"get_time", R"({"zone":"CET"})"}})).correct);
}

TEST(ToolScoreTest, ParallelCallsInEitherOrder) {
  const char* both = R"([{"name":"get_weather","arguments":{"city":["Paris"]}},
                         {"name":"get_weather","arguments":{"city":["Oslo"]}}])";
  EXPECT_TRUE(ScoreCase(Case(both), Answer({{"get_weather", R"({"city":"Oslo"})"},
                                            {"get_weather", R"({"city":"Paris"})"}}))
                  .correct);
  EXPECT_TRUE(ScoreCase(Case(both), Answer({{"get_weather", R"({"city":"Paris"})"},
                                            {"get_weather", R"({"city":"Oslo"})"}}))
                  .correct);
  EXPECT_FALSE(ScoreCase(Case(both), Answer({{"get_weather", R"({"city":"Paris"})"},
                                             {"get_weather", R"({"city":"Paris"})"}}))
                   .correct);
  EXPECT_FALSE(ScoreCase(Case(both), Answer({{"get_weather", R"({"city":"Paris"})"}})).correct);
}

TEST(ToolScoreTest, MarkupLeftInTheContentIsAnInvalidCall) {
  const CaseScore s = ScoreCase(
      Case(kParis),
      Answer(
          {},
          "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
          "{\"city\": <|tool_call_end|><|tool_calls_section_end|>"));
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.malformed_calls, 1);
  EXPECT_EQ(s.valid_calls, 0);
  EXPECT_TRUE(s.called);
  EXPECT_FALSE(s.correct);
}

TEST(ToolScoreTest, ValuesCompareAsBfclDoes) {
  const char* want = R"([{"name":"get_weather","arguments":{"city":["New York, NY"],"days":[3]}}])";
  EXPECT_TRUE(ScoreCase(Case(want), Answer({{"get_weather", R"({"city":"new york ny","days":3})"}})).correct);
  // 3.0 where an integer is declared is the wrong type (BFCL reads it as a float).
  EXPECT_FALSE(
      ScoreCase(Case(want), Answer({{"get_weather", R"({"city":"New York, NY","days":3.0})"}})).correct);
  // An argument the answer does not list is wrong even when the schema has it.
  EXPECT_FALSE(ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city":"Paris","days":2})"}})).correct);
}

TEST(ToolScoreTest, MetricsOverCases) {
  std::vector<CaseScore> s;
  s.push_back(ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city":"Paris"})"}})));  // TP, correct
  s.push_back(ScoreCase(Case(kParis), Answer({{"get_weather", R"({"city":)"}})));          // TP, invalid
  s.push_back(ScoreCase(Case(kParis), Answer({})));                                        // FN
  s.push_back(ScoreCase(Case("[]"), Answer({})));                                          // TN, correct
  s.push_back(ScoreCase(Case("[]"), Answer({{"get_time", R"({"zone":"CET"})"}})));         // FP
  CaseAnswer failed = Answer({});
  failed.error = "HTTP 500";
  s.push_back(ScoreCase(Case(kParis), failed));
  const ToolMetrics m = Aggregate(s);
  EXPECT_EQ(m.cases, 6);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.calls, 3);
  EXPECT_EQ(m.valid_calls, 2);
  EXPECT_DOUBLE_EQ(m.validity, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.trigger_precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.trigger_recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.argument_accuracy, 1.0 / 3);
  EXPECT_DOUBLE_EQ(m.accuracy, 2.0 / 5);
}

TEST(ToolSuiteTest, BadCasesAreClearErrors) {
  const Json base =
      Json::parse(R"({"id":"x","messages":[{"role":"user","content":"hi"}],"tools":[],"expected":[]})");
  EXPECT_TRUE(ParseToolCase(base).ok());
  auto with = [&](const char* key, const Json& v) {
    Json j = base;
    j[key] = v;
    return ParseToolCase(j).status().message();
  };
  EXPECT_EQ(with("id", ""), "id: want a non-empty string");
  EXPECT_EQ(with("messages", Json::array()), "case 'x': messages: want a non-empty array");
  EXPECT_EQ(with("tools", Json::array({{{"type", "function"}}})),
            "case 'x': tools: every tool needs function.name");
  EXPECT_EQ(with("expected", Json::parse(R"([{"name":"nope","arguments":{}}])")),
            "case 'x': expected call 'nope' is not an offered tool");
}

TEST(JsonSchemaTest, KeywordsAndErrors) {
  const Json schema = Json::parse(R"({"type":"object","properties":{
    "n":{"type":["integer","null"]},"tags":{"type":"array","items":{"type":"string","minLength":2},"maxItems":2},
    "pick":{"anyOf":[{"const":1},{"const":"one"}]},"only":{"oneOf":[{"type":"number"},{"type":"integer"}]}},
    "additionalProperties":false})");
  EXPECT_TRUE(ValidateJsonSchema(schema, Json::parse(R"({"n":2.0,"tags":["ab"],"pick":"one"})")).ok());
  EXPECT_TRUE(ValidateJsonSchema(schema, Json::parse(R"({"n":null})")).ok());
  EXPECT_EQ(ValidateJsonSchema(schema, Json::parse(R"({"n":2.5})")).message(),
            "$.n: 2.5 is not of type [\"integer\",\"null\"]");
  EXPECT_EQ(ValidateJsonSchema(schema, Json::parse(R"({"tags":["a"]})")).message(),
            "$.tags[0]: \"a\" is shorter than 2");
  EXPECT_EQ(ValidateJsonSchema(schema, Json::parse(R"({"x":1})")).message(),
            "$: property 'x' is not allowed");
  EXPECT_FALSE(ValidateJsonSchema(schema, Json::parse(R"({"pick":2})")).ok());
  EXPECT_FALSE(ValidateJsonSchema(schema, Json::parse(R"({"only":3})")).ok());  // both match: not exactly one
  EXPECT_TRUE(ValidateJsonSchema(schema, Json::parse(R"({"only":3.5})")).ok());
  // A bad schema is an error about the schema, not a crash.
  EXPECT_EQ(ValidateJsonSchema(Json::parse(R"({"type":"strnig"})"), Json(1)).message(),
            "schema at $: unknown type 'strnig'");
  Json deep = Json::object();
  for (int i = 0; i < 100; ++i) deep = Json{{"items", deep}, {"type", "array"}};
  Json value = Json::array();
  for (int i = 0; i < 100; ++i) value = Json::array({value});
  EXPECT_EQ(ValidateJsonSchema(deep, value).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::tools::eval
