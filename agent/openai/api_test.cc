// Request parsing: the top level (bad JSON, depth limit, unknown fields), every sampling field's
// validation for both endpoints, and ErrorJson's shape.

#include "agent/openai/api.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tandem::agent::openai {
namespace {

constexpr char kChatHead[] = R"({"model":"m","messages":[{"role":"user","content":"hi"}])";
constexpr char kCompletionHead[] = R"({"model":"m","prompt":"hi")";

std::string Chat(const std::string& fields) { return std::string(kChatHead) + fields + "}"; }
std::string Completion(const std::string& fields) { return std::string(kCompletionHead) + fields + "}"; }

ChatCompletionRequest ChatOk(const std::string& body, const ParseOptions& options = {}) {
  auto result = ParseChatCompletionRequest(body, options);
  if (auto* error = std::get_if<ApiError>(&result)) {
    ADD_FAILURE() << body << " -> " << error->message;
    return {};
  }
  return std::get<ChatCompletionRequest>(result);
}

ApiError ChatError(const std::string& body) {
  auto result = ParseChatCompletionRequest(body);
  if (!std::holds_alternative<ApiError>(result)) {
    ADD_FAILURE() << body << " parsed";
    return {};
  }
  return std::get<ApiError>(result);
}

// One field's value: accepted or rejected (a 400 naming `param`).
struct FieldCase {
  std::string fields;  // appended to a valid body: `,"temperature":3`
  bool ok;
  std::string param;
};

// The sampling fields both endpoints share.
const std::vector<FieldCase>& SamplingCases() {
  static const std::vector<FieldCase> cases = {
      {R"(,"temperature":0)", true, ""},
      {R"(,"temperature":2)", true, ""},
      {R"(,"temperature":null)", true, ""},
      {R"(,"temperature":2.01)", false, "temperature"},
      {R"(,"temperature":-1)", false, "temperature"},
      {R"(,"temperature":"1")", false, "temperature"},
      {R"(,"top_p":1)", true, ""},
      {R"(,"top_p":0.1)", true, ""},
      {R"(,"top_p":0)", false, "top_p"},
      {R"(,"top_p":1.5)", false, "top_p"},
      {R"(,"top_k":-1)", true, ""},
      {R"(,"top_k":0)", true, ""},
      {R"(,"top_k":40)", true, ""},
      {R"(,"top_k":-2)", false, "top_k"},
      {R"(,"top_k":1.5)", false, "top_k"},
      {R"(,"top_k":true)", false, "top_k"},
      {R"(,"min_p":0)", true, ""},
      {R"(,"min_p":1)", true, ""},
      {R"(,"min_p":1.1)", false, "min_p"},
      {R"(,"repetition_penalty":2)", true, ""},
      {R"(,"repetition_penalty":0)", false, "repetition_penalty"},
      {R"(,"repetition_penalty":2.5)", false, "repetition_penalty"},
      {R"(,"frequency_penalty":-2)", true, ""},
      {R"(,"frequency_penalty":2.1)", false, "frequency_penalty"},
      {R"(,"presence_penalty":2)", true, ""},
      {R"(,"presence_penalty":-3)", false, "presence_penalty"},
      {R"(,"seed":-5)", true, ""},
      {R"(,"seed":18446744073709551615)", true, ""},
      {R"(,"seed":1.5)", false, "seed"},
      {R"(,"seed":"7")", false, "seed"},
      {R"(,"stop":"x")", true, ""},
      {R"(,"stop":["a","b","c","d"])", true, ""},
      {R"(,"stop":[])", true, ""},
      {R"(,"stop":["a","b","c","d","e"])", false, "stop"},
      {R"(,"stop":"")", false, "stop"},
      {R"(,"stop":["a",""])", false, "stop"},
      {R"(,"stop":[1])", false, "stop"},
      {R"(,"stop":{})", false, "stop"},
      {R"(,"stop_token_ids":[1,2])", true, ""},
      {R"(,"stop_token_ids":[-1])", false, "stop_token_ids"},
      {R"(,"max_tokens":1)", true, ""},
      {R"(,"max_tokens":5.0)", true, ""},
      {R"(,"max_tokens":0)", false, "max_tokens"},
      {R"(,"max_tokens":1048577)", false, "max_tokens"},
      {R"(,"max_tokens":"5")", false, "max_tokens"},
      {R"(,"min_tokens":3,"max_tokens":3)", true, ""},
      {R"(,"min_tokens":4,"max_tokens":3)", false, "min_tokens"},
      {R"(,"min_tokens":-1)", false, "min_tokens"},
      {R"(,"ignore_eos":true)", true, ""},
      {R"(,"ignore_eos":1)", false, "ignore_eos"},
      {R"(,"skip_special_tokens":false)", true, ""},
      {R"(,"skip_special_tokens":"no")", false, "skip_special_tokens"},
      {R"(,"n":1)", true, ""},
      {R"(,"n":null)", true, ""},
      {R"(,"n":2)", false, "n"},
      {R"(,"n":0)", false, "n"},
      {R"(,"stream":true)", true, ""},
      {R"(,"stream":"yes")", false, "stream"},
      {R"(,"stream":true,"stream_options":{"include_usage":true})", true, ""},
      {R"(,"stream_options":{"include_usage":1})", false, "stream_options.include_usage"},
      {R"(,"stream_options":[])", false, "stream_options"},
      {R"(,"user":"u","some_new_field":{"x":[1]})", true, ""},
  };
  return cases;
}

void ExpectCase(const FieldCase& c, const std::variant<ApiError, bool>& outcome) {
  if (c.ok) {
    if (auto* e = std::get_if<ApiError>(&outcome)) ADD_FAILURE() << c.fields << " -> " << e->message;
    return;
  }
  const ApiError* e = std::get_if<ApiError>(&outcome);
  ASSERT_NE(e, nullptr) << c.fields << " parsed";
  EXPECT_EQ(e->status, 400) << c.fields;
  EXPECT_EQ(e->type, "invalid_request_error");
  EXPECT_EQ(e->param, c.param) << c.fields << ": " << e->message;
  EXPECT_NE(e->message.find(c.param), std::string::npos) << e->message;
}

template <typename T>
std::variant<ApiError, bool> Outcome(const std::variant<T, ApiError>& result) {
  if (auto* e = std::get_if<ApiError>(&result)) return *e;
  return true;
}

TEST(ParseRequest, SamplingFieldsChat) {
  for (const FieldCase& c : SamplingCases())
    ExpectCase(c, Outcome(ParseChatCompletionRequest(Chat(c.fields))));
}

TEST(ParseRequest, SamplingFieldsCompletion) {
  for (const FieldCase& c : SamplingCases()) {
    ExpectCase(c, Outcome(ParseCompletionRequest(Completion(c.fields))));
  }
}

TEST(ParseRequest, MessageOfTemperature) {
  EXPECT_EQ(ChatError(Chat(R"(,"temperature":3)")).message, "'temperature' must be a number in [0, 2]");
  EXPECT_EQ(ChatError(Chat(R"(,"top_p":0)")).message, "'top_p' must be a number in (0, 1]");
}

TEST(ParseRequest, SamplingValuesMapped) {
  ChatCompletionRequest r =
      ChatOk(Chat(R"(,"temperature":0.5,"top_p":0.9,"top_k":-1,"min_p":0.05,"repetition_penalty":1.1,)"
                  R"("frequency_penalty":0.5,"presence_penalty":-0.5,"seed":-1,"stop":"END","max_tokens":10,)"
                  R"("max_completion_tokens":20,"min_tokens":2,"ignore_eos":true,"stop_token_ids":[7])"));
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_FLOAT_EQ(r.params.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(r.params.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.params.presence_penalty, -0.5f);
  EXPECT_EQ(r.params.seed, UINT64_MAX);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.params.max_tokens, 20);  // max_completion_tokens wins
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.stop_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(r.params.logprobs, -1);
}

TEST(ParseRequest, DefaultsAndOptions) {
  ParseOptions options;
  options.default_max_tokens = 77;
  options.max_max_tokens = 100;
  ChatCompletionRequest r = ChatOk(Chat(""), options);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.params.max_tokens, 77);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.params.seed.has_value());
  EXPECT_FALSE(r.chat.enable_thinking.has_value());
  EXPECT_TRUE(
      std::holds_alternative<ApiError>(ParseChatCompletionRequest(Chat(R"(,"max_tokens":101)"), options)));
  auto c = ParseCompletionRequest(Completion(""), options);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(c));
  EXPECT_EQ(std::get<CompletionRequest>(c).params.max_tokens, 77);
}

TEST(ParseRequest, StreamOptions) {
  EXPECT_TRUE(ChatOk(Chat(R"(,"stream":true,"stream_options":{"include_usage":true})")).include_usage);
  // include_usage only means something when streaming.
  EXPECT_FALSE(ChatOk(Chat(R"(,"stream_options":{"include_usage":true})")).include_usage);
  EXPECT_FALSE(ChatOk(Chat(R"(,"stream":true,"stream_options":null)")).include_usage);
}

TEST(ParseRequest, BadJsonAndTopLevel) {
  for (std::string body : {"", "{", "{\"model\":}", "nul", "{\"a\":1} x", "\"\xff\""}) {
    ApiError e = ChatError(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.message.rfind("invalid JSON: ", 0), 0u) << e.message;
  }
  for (std::string body : {"[]", "1", "\"s\"", "null"}) {
    ApiError e = ChatError(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("object"), std::string::npos) << e.message;
  }
  EXPECT_EQ(ChatError(R"({"messages":[{"role":"user","content":"x"}]})").param, "model");
  EXPECT_EQ(ChatError(R"({"model":5,"messages":[{"role":"user","content":"x"}]})").param, "model");
}

// A valid body whose deepest value sits `depth` levels down (the top-level object is level 1).
std::string BodyOfDepth(int depth) {
  return std::string(kChatHead) + R"(,"x":)" + std::string(depth - 1, '[') + std::string(depth - 1, ']') +
         "}";
}

TEST(ParseRequest, DepthLimit) {
  ChatOk(BodyOfDepth(64));
  ApiError e = ChatError(BodyOfDepth(65));
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("deeper than 64"), std::string::npos);
  // Brackets inside strings are not nesting.
  ChatOk(Chat(R"(,"x":")" + std::string(1000, '[') + "\""));
  // A megabyte of '[' is refused before any DOM is built.
  EXPECT_EQ(ChatError(std::string(1 << 20, '[')).status, 400);
  ParseOptions shallow;
  shallow.max_json_depth = 3;  // kChatHead is 3 deep: {"messages":[{...}]}
  EXPECT_TRUE(std::holds_alternative<ChatCompletionRequest>(
      ParseChatCompletionRequest(kChatHead + std::string("}"), shallow)));
  shallow.max_json_depth = 2;
  EXPECT_TRUE(
      std::holds_alternative<ApiError>(ParseChatCompletionRequest(kChatHead + std::string("}"), shallow)));
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseCompletionRequest(std::string(1 << 20, '{'))));
}

TEST(ParseCompletionRequest, Prompt) {
  struct Case {
    std::string prompt;
    bool ok;
    bool tokens;
  };
  for (const Case& c : std::vector<Case>{{R"("hello")", true, false},
                                         {R"(["hello"])", true, false},
                                         {R"([1,2,3])", true, true},
                                         {R"([[1,2,3]])", true, true},
                                         {R"("")", false, false},
                                         {R"([])", false, false},
                                         {R"(["a","b"])", false, false},
                                         {R"([[1],[2]])", false, false},
                                         {R"([1,-2])", false, false},
                                         {R"([1,"a"])", false, false},
                                         {R"(5)", false, false},
                                         {R"(null)", false, false}}) {
    auto result = ParseCompletionRequest(R"({"model":"m","prompt":)" + c.prompt + "}");
    if (!c.ok) {
      ASSERT_TRUE(std::holds_alternative<ApiError>(result)) << c.prompt;
      EXPECT_EQ(std::get<ApiError>(result).param, "prompt") << c.prompt;
      continue;
    }
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(result)) << std::get<ApiError>(result).message;
    const CompletionRequest& r = std::get<CompletionRequest>(result);
    EXPECT_EQ(r.prompt_is_tokens, c.tokens);
    if (c.tokens) {
      EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
    } else {
      EXPECT_EQ(r.prompt_text, "hello");
    }
  }
}

TEST(ParseCompletionRequest, LogprobsAndEcho) {
  std::vector<FieldCase> cases = {
      {R"(,"logprobs":0)", true, ""},
      {R"(,"logprobs":5)", true, ""},
      {R"(,"logprobs":null)", true, ""},
      {R"(,"logprobs":6)", false, "logprobs"},
      {R"(,"logprobs":true)", false, "logprobs"},
      {R"(,"echo":true)", true, ""},
      {R"(,"echo":"y")", false, "echo"},
  };
  for (const FieldCase& c : cases) ExpectCase(c, Outcome(ParseCompletionRequest(Completion(c.fields))));
  auto r = std::get<CompletionRequest>(ParseCompletionRequest(Completion(R"(,"logprobs":3,"echo":true)")));
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(std::get<CompletionRequest>(ParseCompletionRequest(Completion(""))).params.logprobs, -1);
}

TEST(ErrorJson, Shape) {
  ApiError e;
  e.message = "bad \xff";
  auto j = nlohmann::json::parse(ErrorJson(e));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_TRUE(j["error"]["code"].is_null());
  e.param = "temperature";
  e.code = "model_not_found";
  j = nlohmann::json::parse(ErrorJson(e));
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  EXPECT_EQ(j["error"]["message"].get<std::string>().substr(0, 4), "bad ");
}

}  // namespace
}  // namespace tandem::agent::openai
