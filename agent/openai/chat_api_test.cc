// /v1/chat/completions specifics: messages (roles, content parts, tool calls, tool results),
// tools and tool_choice, logprobs / top_logprobs, chat_template_kwargs.

#include <string>

#include <gtest/gtest.h>

#include "agent/openai/api.h"

namespace tandem::agent::openai {
namespace {

using engine::text::ChatRole;

std::variant<ChatCompletionRequest, ApiError> Parse(const std::string& messages,
                                                    const std::string& extra = "") {
  return ParseChatCompletionRequest(R"({"model":"m","messages":)" + messages + extra + "}");
}

ChatCompletionRequest Ok(const std::string& messages, const std::string& extra = "") {
  auto result = Parse(messages, extra);
  if (auto* e = std::get_if<ApiError>(&result)) {
    ADD_FAILURE() << messages << extra << " -> " << e->message;
    return {};
  }
  return std::get<ChatCompletionRequest>(result);
}

// The param of the error, or "<ok>".
std::string ErrorParam(const std::string& messages, const std::string& extra = "") {
  auto result = Parse(messages, extra);
  if (auto* e = std::get_if<ApiError>(&result)) {
    EXPECT_EQ(e->status, 400);
    return e->param;
  }
  return "<ok>";
}

TEST(ParseChatMessages, RolesAndContent) {
  ChatCompletionRequest r =
      Ok(R"([{"role":"system","content":"s"},{"role":"developer","content":"d"},)"
         R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"bob"},)"
         R"({"role":"assistant","content":"x","reasoning_content":"why"}])");
  const auto& m = r.chat.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, ChatRole::kSystem);
  EXPECT_EQ(m[1].role, ChatRole::kSystem);
  EXPECT_EQ(m[1].content, "d");
  EXPECT_EQ(m[2].role, ChatRole::kUser);
  EXPECT_EQ(m[2].content, "ab");
  EXPECT_EQ(m[2].name, "bob");
  EXPECT_FALSE(m[0].name.has_value());
  EXPECT_EQ(m[3].reasoning_content, "why");
  EXPECT_FALSE(m[2].reasoning_content.has_value());
}

TEST(ParseChatMessages, ToolCallsAndResults) {
  ChatCompletionRequest r =
      Ok(R"([{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":[)"
         R"({"id":"call_1","type":"function",)"
         R"("function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},)"
         R"({"id":"call_2","function":{"name":"f","arguments":{"b":1,"a":2}}}]},)"
         R"({"role":"tool","tool_call_id":"call_1","content":"sunny"}])");
  const auto& m = r.chat.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].role, ChatRole::kAssistant);
  EXPECT_EQ(m[1].content, "");
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(m[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(m[1].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(m[1].tool_calls[1].arguments, R"({"b":1,"a":2})");  // an object: its text, order kept
  EXPECT_EQ(m[2].role, ChatRole::kTool);
  EXPECT_EQ(m[2].tool_call_id, "call_1");
  EXPECT_EQ(m[2].content, "sunny");
}

TEST(ParseChatMessages, Errors) {
  struct Case {
    std::string messages;
    std::string param;
  };
  const std::vector<Case> cases = {
      {R"([])", "messages"},
      {R"({})", "messages"},
      {R"(null)", "messages"},
      {R"([1])", "messages[0]"},
      {R"([{"content":"x"}])", "messages[0].role"},
      {R"([{"role":"robot","content":"x"}])", "messages[0].role"},
      {R"([{"role":"user"}])", "messages[0].content"},
      {R"([{"role":"user","content":null}])", "messages[0].content"},
      {R"([{"role":"user","content":5}])", "messages[0].content"},
      {R"([{"role":"user","content":"a"},{"role":"user","content":[{"type":"image_url","image_url":{}}]}])",
       "messages[1].content[0].type"},
      {R"([{"role":"user","content":[{"type":"text"}]}])", "messages[0].content[0].text"},
      {R"([{"role":"user","content":["x"]}])", "messages[0].content[0]"},
      {R"([{"role":"user","content":"x","name":1}])", "messages[0].name"},
      {R"([{"role":"tool","content":"x"}])", "messages[0].tool_call_id"},
      {R"([{"role":"assistant","tool_calls":{}}])", "messages[0].tool_calls"},
      {R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].id"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","type":"x",)"
       R"("function":{"name":"f","arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].type"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c"}]}])", "messages[0].tool_calls[0].function"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":3}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role":"assistant","content":"x","reasoning_content":1}])", "messages[0].reasoning_content"},
  };
  for (const Case& c : cases) EXPECT_EQ(ErrorParam(c.messages), c.param) << c.messages;
}

constexpr char kUser[] = R"([{"role":"user","content":"hi"}])";
constexpr char kTools[] =
    R"(,"tools":[{"type":"function","function":{"name":"get_weather","description":"d",)"
    R"("parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}}},)"
    R"({"type":"function","function":{"name":"noop"}}])";

TEST(ParseChatTools, KeptAsSentInOrder) {
  ChatCompletionRequest r = Ok(kUser, kTools);
  ASSERT_EQ(r.chat.tools_json.size(), 2u);
  EXPECT_EQ(r.chat.tools_json[0],
            R"({"type":"function","function":{"name":"get_weather","description":"d","parameters":)"
            R"({"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}}})");
  EXPECT_EQ(r.chat.tools_json[1], R"({"type":"function","function":{"name":"noop"}})");
  EXPECT_EQ(r.tool_names, (std::vector<std::string>{"get_weather", "noop"}));  // what responses may call
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(Ok(kUser, R"(,"tools":null)").chat.tools_json.empty());
}

TEST(ParseChatTools, ToolChoice) {
  EXPECT_EQ(Ok(kUser, std::string(kTools) + R"(,"tool_choice":"none")").tool_choice, ToolChoice::kNone);
  EXPECT_EQ(Ok(kUser, std::string(kTools) + R"(,"tool_choice":"required")").tool_choice,
            ToolChoice::kRequired);
  EXPECT_EQ(Ok(kUser, R"(,"tool_choice":"auto")").tool_choice, ToolChoice::kAuto);
  ChatCompletionRequest r =
      Ok(kUser, std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"noop"}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(r.tool_choice_name, "noop");
  for (std::string choice :
       {R"("always")", R"(1)", R"({"type":"function"})", R"({"function":{"name":"noop"}})",
        R"({"type":"function","function":{"name":"other"}})"}) {
    EXPECT_EQ(ErrorParam(kUser, std::string(kTools) + R"(,"tool_choice":)" + choice), "tool_choice")
        << choice;
  }
  EXPECT_EQ(ErrorParam(kUser, R"(,"tool_choice":"required")"), "tool_choice");
}

TEST(ParseChatTools, Errors) {
  struct Case {
    std::string tools;
    std::string param;
  };
  const std::vector<Case> cases = {
      {R"({})", "tools"},
      {R"([1])", "tools[0]"},
      {R"([{"function":{"name":"f"}}])", "tools[0].type"},
      {R"([{"type":"retrieval","function":{"name":"f"}}])", "tools[0].type"},
      {R"([{"type":"function"}])", "tools[0].function"},
      {R"([{"type":"function","function":[]}])", "tools[0].function"},
      {R"([{"type":"function","function":{"description":"x"}}])", "tools[0].function.name"},
      {R"([{"type":"function","function":{"name":""}}])", "tools[0].function.name"},
      {R"([{"type":"function","function":{"name":"f","description":2}}])", "tools[0].function.description"},
      {R"([{"type":"function","function":{"name":"f","parameters":"x"}}])", "tools[0].function.parameters"},
  };
  for (const Case& c : cases) EXPECT_EQ(ErrorParam(kUser, R"(,"tools":)" + c.tools), c.param) << c.tools;
}

TEST(ParseChatRequest, LogprobsAndThinking) {
  ChatCompletionRequest r = Ok(kUser, R"(,"logprobs":true,"top_logprobs":5)");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.logprobs, 5);
  EXPECT_EQ(Ok(kUser, R"(,"logprobs":true)").params.logprobs, 0);
  EXPECT_EQ(Ok(kUser, R"(,"logprobs":false,"top_logprobs":0)").params.logprobs, -1);
  EXPECT_EQ(ErrorParam(kUser, R"(,"top_logprobs":2)"), "top_logprobs");
  EXPECT_EQ(ErrorParam(kUser, R"(,"logprobs":true,"top_logprobs":21)"), "top_logprobs");
  EXPECT_EQ(ErrorParam(kUser, R"(,"logprobs":1)"), "logprobs");
  EXPECT_EQ(Ok(kUser, R"(,"chat_template_kwargs":{"enable_thinking":false})").chat.enable_thinking, false);
  EXPECT_EQ(Ok(kUser, R"(,"chat_template_kwargs":{"other":1})").chat.enable_thinking, std::nullopt);
  EXPECT_EQ(ErrorParam(kUser, R"(,"chat_template_kwargs":{"enable_thinking":"no"})"),
            "chat_template_kwargs.enable_thinking");
  EXPECT_EQ(ErrorParam(kUser, R"(,"chat_template_kwargs":3)"), "chat_template_kwargs");
}

}  // namespace
}  // namespace tandem::agent::openai
