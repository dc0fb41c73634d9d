#pragma once
// Tool-calling suites and their scores (`tandem eval tools`, docs/eval.md).
//
// A suite is JSONL, one case per line:
//   {"id": "weather-3", "category": "simple",
//    "messages": [{"role": "user", "content": "..."}],      // OpenAI chat messages
//    "tools": [{"type": "function", "function": {"name": ..., "parameters": {JSON schema}}}],
//    "expected": [{"name": "get_weather", "arguments": {"city": ["Paris"], "unit": ["celsius", ""]}}]}
// `expected` is empty when the right answer is no call (call_match.h says how calls are judged).
//
// An answer is what a model replied to one case, also JSONL (what `eval tools` records and `eval
// score` reads): {"id": ..., "tool_calls": [{"name": ..., "arguments": "<JSON text>"}],
// "content": "...", "error": "..."}; `error` marks a request that failed (not scored).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tools/eval/call_match.h"

namespace tandem::tools::eval {

struct ToolCase {
  std::string id;
  std::string category;     // free text: "simple", "multiple", "parallel", "irrelevance", ...
  nlohmann::json messages;  // array
  nlohmann::json tools;     // array of OpenAI tool declarations
  std::vector<ExpectedCall> expected;
  std::map<std::string, nlohmann::json> parameters;  // tool name -> its parameters schema
};

// One case from its JSON. Errors: InvalidArgument naming the field.
StatusOr<ToolCase> ParseToolCase(const nlohmann::json& j);
// Every case of a JSONL file (blank lines skipped). Errors: NotFound, or InvalidArgument with the
// line number; ids must be unique.
StatusOr<std::vector<ToolCase>> LoadToolSuite(const std::string& path);

struct RawCall {
  std::string name;
  std::string arguments;  // as the server sent it (should be a JSON object)
};

struct CaseAnswer {
  std::string id;
  std::vector<RawCall> tool_calls;
  std::string content;
  std::string error;  // non-empty: the request failed; the case is not scored
};
nlohmann::json AnswerToJson(const CaseAnswer& a);
StatusOr<CaseAnswer> AnswerFromJson(const nlohmann::json& j);
// The `choices[0].message` of an OpenAI chat completion as an answer. Errors: InvalidArgument.
StatusOr<CaseAnswer> AnswerFromChatCompletion(const std::string& id, const nlohmann::json& response);

// One call's validity: it parses as a JSON object, names an offered tool, and its arguments
// satisfy that tool's schema (json_schema.h).
struct CallVerdict {
  std::string name;
  bool valid = false;
  std::string why;  // empty when valid
};

struct CaseScore {
  std::string id, category;
  bool scored = false;  // false: the request failed
  std::string error;
  int calls = 0;  // well-formed calls plus malformed ones left in the content
  int valid_calls = 0;
  int malformed_calls = 0;  // tool-call markup left in the content (the server could not parse it)
  bool should_call = false, called = false;
  bool correct = false;  // the calls answer the case (or no call where none is right)
  std::string why;       // why not correct
  std::vector<CallVerdict> verdicts;
};
CaseScore ScoreCase(const ToolCase& c, const CaseAnswer& answer);
nlohmann::json ScoreToJson(const CaseScore& s);

// The suite's figures. Ratios are -1 where their denominator is 0.
struct ToolMetrics {
  int64_t cases = 0, failed = 0;  // failed: requests that did not complete (not in the figures)
  int64_t calls = 0, valid_calls = 0;
  int64_t true_positive = 0, false_positive = 0, false_negative = 0, true_negative = 0;
  int64_t should_call = 0, correct_calls = 0, correct = 0;
  double validity = -1;           // valid calls / calls made
  double trigger_precision = -1;  // called where a call was right / called
  double trigger_recall = -1;     // called where a call was right / cases wanting a call
  double argument_accuracy = -1;  // cases wanting a call answered exactly / cases wanting a call
  double accuracy = -1;           // every case judged right (no call where none is right) / cases
};
ToolMetrics Aggregate(const std::vector<CaseScore>& scores);
nlohmann::json MetricsToJson(const ToolMetrics& m);

}  // namespace tandem::tools::eval
