// Non-streaming chat.completion bodies, finish reasons, error events, invalid UTF-8 in model
// text, and argument splitting.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/openai/response.h"
#include "agent/openai/response_json.h"

namespace tandem::agent::openai {
namespace {

using engine::runtime::FinishReason;
using engine::text::ChatFamily;
using Json = nlohmann::json;

ResponseOptions Options() {
  ResponseOptions o;
  o.id = "chatcmpl-1";
  o.model = "m";
  o.created = 42;
  return o;
}

std::unique_ptr<ChatResponseBuilder> Builder(const ResponseOptions& options) {
  auto b = ChatResponseBuilder::Create(options);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return *std::move(b);
}

TokenPiece Text(std::string text) {
  TokenPiece p;
  p.text = std::move(text);
  return p;
}

TEST(ChatBody, PlainText) {
  auto b = Builder(Options());
  b->Add(Text("Hello "));
  b->Add(Text("there"));
  Json body = Json::parse(b->Body(FinishReason::kStop, Usage{3, 2, 0}));
  EXPECT_EQ(body["id"], "chatcmpl-1");
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 42);
  EXPECT_EQ(body["model"], "m");
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"], (Json{{"role", "assistant"}, {"content", "Hello there"}}));
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(ChatBody, EmptyOutputHasEmptyContent) {
  auto b = Builder(Options());
  Json body = Json::parse(b->Body(FinishReason::kLength, {}));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST(ChatBody, GlmReasoningAndToolCall) {
  ResponseOptions o = Options();
  o.family = ChatFamily::kGlm;
  o.tools_enabled = true;
  o.reasoning = true;
  auto b = Builder(o);
  const std::string text =
      "<think>need data</think><tool_call>lookup<arg_key>q</arg_key><arg_value>x</arg_value></tool_call>";
  for (char c : text) b->Add(Text(std::string(1, c)));
  Json body = Json::parse(b->Body(FinishReason::kStop, {}));
  const Json& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["reasoning_content"], "need data");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0],
            (Json{{"id", "call_1_0"},
                  {"type", "function"},
                  {"function", {{"name", "lookup"}, {"arguments", R"({"q":"x"})"}}}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(b->made_tool_calls());
}

TEST(ChatBody, ToolCallCutByLengthKeepsLength) {
  ResponseOptions o = Options();
  o.tools_enabled = true;
  auto b = Builder(o);
  b->Add(
      Text("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
           "<|tool_call_end|>"));
  Json body = Json::parse(b->Body(FinishReason::kLength, {}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST(ChatBody, BadToolsJsonIsAnError) {
  ResponseOptions o = Options();
  o.family = ChatFamily::kGlm;
  o.tools_enabled = true;
  o.tools_json = {"{not json"};
  EXPECT_EQ(ChatResponseBuilder::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatBody, InvalidUtf8NeverThrows) {
  const std::string bad = "ok \xff\xfe \xc3 end";
  for (bool tools : {false, true}) {
    ResponseOptions o = Options();
    o.tools_enabled = tools;
    o.id = "chatcmpl-\xff";
    o.model = "\xc0";
    auto stream = Builder(o);
    std::vector<std::string> events = stream->StreamPiece(Text(bad));
    for (auto& e :
         stream->StreamPiece(Text("<|tool_calls_section_begin|><|tool_call_begin|>functions.\xff:0"
                                  "<|tool_call_argument_begin|>{\"a\":\"\xfe\"}<|tool_call_end|>"))) {
      events.push_back(e);
    }
    for (auto& e : stream->StreamFinish(FinishReason::kStop, {})) events.push_back(e);
    for (const std::string& e : events) {
      if (e != "data: [DONE]\n\n") {
        EXPECT_NO_THROW(Json::parse(e.substr(6))) << e;
      }
    }
    auto whole = Builder(o);
    whole->Add(Text(bad));
    Json body;
    ASSERT_NO_THROW(body = Json::parse(whole->Body(FinishReason::kStop, {})));
    EXPECT_EQ(body["choices"][0]["message"]["content"], "ok \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd end");
  }
}

TEST(FinishReasonFor, Table) {
  EXPECT_EQ(FinishReasonFor(FinishReason::kStop, false), "stop");
  EXPECT_EQ(FinishReasonFor(FinishReason::kStop, true), "tool_calls");
  EXPECT_EQ(FinishReasonFor(FinishReason::kLength, false), "length");
  EXPECT_EQ(FinishReasonFor(FinishReason::kLength, true), "length");
  EXPECT_EQ(FinishReasonFor(FinishReason::kAbort, false), "abort");
  EXPECT_EQ(FinishReasonFor(FinishReason::kCancelled, true), "abort");
  EXPECT_EQ(FinishReasonFor(FinishReason::kRejected, false), "abort");
}

TEST(StreamErrorEvents, ErrorThenDone) {
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = "engine failed";
  std::vector<std::string> events = StreamErrorEvents(e);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1], "data: [DONE]\n\n");
  ASSERT_TRUE(events[0].starts_with("data: ") && events[0].ends_with("\n\n"));
  Json j = Json::parse(events[0].substr(6));
  EXPECT_EQ(j["error"]["type"], "server_error");
  EXPECT_EQ(j["error"]["message"], "engine failed");
}

TEST(SplitUtf8, PiecesRespectCharacters) {
  using internal::SplitUtf8;
  EXPECT_TRUE(SplitUtf8("", 16).empty());
  EXPECT_EQ(SplitUtf8("abcdefgh", 4), (std::vector<std::string_view>{"abcd", "efgh"}));
  // "é" is 2 bytes: a cut between its bytes moves back.
  EXPECT_EQ(SplitUtf8("abc\xc3\xa9xy", 4), (std::vector<std::string_view>{"abc", "\xc3\xa9xy"}));
  const std::string emoji = "\xf0\x9f\x99\x82\xf0\x9f\x99\x82\xf0\x9f\x99\x82";  // 3 x 4 bytes
  EXPECT_EQ(SplitUtf8(emoji, 6).size(), 3u);
  // Invalid UTF-8 (only continuation bytes) is still cut, never looped on.
  EXPECT_EQ(SplitUtf8(std::string(10, '\x80'), 4).size(), 3u);
}

}  // namespace
}  // namespace tandem::agent::openai
