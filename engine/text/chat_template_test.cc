#include "engine/text/chat_template.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tandem::engine::text {
namespace {

ChatMessage Msg(ChatRole role, std::string content) {
  ChatMessage m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

ChatMessage ToolResult(std::string id, std::string content) {
  ChatMessage m = Msg(ChatRole::kTool, std::move(content));
  m.tool_call_id = std::move(id);
  return m;
}

constexpr char kWeather[] =
    R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}})";

ChatRequest ToolRoundTrip() {
  ChatRequest r;
  r.tools_json = {kWeather};
  r.messages.push_back(Msg(ChatRole::kUser, "Weather in Paris?"));
  ChatMessage call = Msg(ChatRole::kAssistant, "");
  call.tool_calls.push_back({"functions.get_weather:0", "get_weather", R"({"city": "Paris", "days": 2})"});
  r.messages.push_back(call);
  r.messages.push_back(ToolResult("functions.get_weather:0", "18 C"));
  r.messages.push_back(Msg(ChatRole::kAssistant, "18 C in Paris."));
  return r;
}

// Hand-checked against the template text (engine/text/testdata/*.jinja), turn by turn.
TEST(KimiChatTemplate, PlainChatGetsTheDefaultSystemPrompt) {
  ChatRequest r;
  r.messages.push_back(Msg(ChatRole::kUser, "Hello!"));
  EXPECT_EQ(RenderKimiK2Chat(r).value(),
            "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
            "<|im_user|>user<|im_middle|>Hello!<|im_end|><|im_assistant|>assistant<|im_middle|>");
}

TEST(KimiChatTemplate, SystemPromptReplacesTheDefault) {
  ChatRequest r;
  r.add_generation_prompt = false;
  r.messages = {Msg(ChatRole::kSystem, "Be terse."), Msg(ChatRole::kUser, "Hi")};
  EXPECT_EQ(RenderKimiK2Chat(r).value(),
            "<|im_system|>system<|im_middle|>Be terse.<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|>");
}

TEST(KimiChatTemplate, ToolCallRoundTrip) {
  EXPECT_EQ(RenderKimiK2Chat(ToolRoundTrip()).value(),
            "<|im_system|>tool_declare<|im_middle|>"
            R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
            R"("properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])"
            "<|im_end|>"
            "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
            "<|im_user|>user<|im_middle|>Weather in Paris?<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>"
            "functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 2}"
            "<|tool_call_end|><|tool_calls_section_end|><|im_end|>"
            "<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\n18 C<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>18 C in Paris.<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>");
}

TEST(GlmChatTemplate, PlainChat) {
  ChatRequest r;
  r.messages = {Msg(ChatRole::kSystem, "Be terse."), Msg(ChatRole::kUser, "Hi"),
                Msg(ChatRole::kAssistant, "Hello."), Msg(ChatRole::kUser, "Bye")};
  EXPECT_EQ(RenderGlmChat(r).value(),
            "[gMASK]<sop><|system|>\nBe terse.<|user|>\nHi<|assistant|>\n<think></think>\nHello."
            "<|user|>\nBye<|assistant|>");
}

TEST(GlmChatTemplate, ThinkingOffAddsNothinkAndAnEmptyThinkBlock) {
  ChatRequest r;
  r.enable_thinking = false;
  r.messages = {Msg(ChatRole::kUser, "Hi"), Msg(ChatRole::kUser, "Again /nothink")};
  EXPECT_EQ(RenderGlmChat(r).value(),
            "[gMASK]<sop><|user|>\nHi/nothink<|user|>\nAgain /nothink<|assistant|>\n<think></think>");
}

TEST(GlmChatTemplate, ToolCallRoundTrip) {
  std::string rendered = RenderGlmChat(ToolRoundTrip()).value();
  std::string tail = rendered.substr(rendered.rfind("</tools>"));
  EXPECT_EQ(tail,
            "</tools>\n\nFor each function call, output the function name and arguments within the "
            "following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
            "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
            "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>"
            "<|user|>\nWeather in Paris?<|assistant|>\n<think></think>\n<tool_call>get_weather\n"
            "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
            "<arg_value>2</arg_value>\n</tool_call><|observation|>\n<tool_response>\n18 C\n</tool_response>"
            "<|assistant|>\n<think></think>\n18 C in Paris.<|assistant|>");
  EXPECT_NE(rendered.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "),
            std::string::npos);
}

TEST(ChatTemplate, BadJsonIsAnError) {
  ChatRequest r = ToolRoundTrip();
  r.tools_json = {"{not json"};
  EXPECT_EQ(RenderChat(ChatFamily::kKimiK2, r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderChat(ChatFamily::kGlm, r).status().code(), StatusCode::kInvalidArgument);
  r = ToolRoundTrip();
  r.messages[1].tool_calls[0].arguments = "[1]";
  EXPECT_EQ(RenderGlmChat(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(RenderKimiK2Chat(r).ok());  // Kimi copies arguments verbatim, as its template does
}

TEST(ChatTemplate, FamilyNames) {
  EXPECT_EQ(ParseChatFamily("kimi_k2").value(), ChatFamily::kKimiK2);
  EXPECT_EQ(ChatFamilyName(ParseChatFamily("glm").value()), "glm");
  EXPECT_FALSE(ParseChatFamily("llama").ok());
}

// The goldens rendered by jinja2 from our template reconstructions (testdata/render_goldens.py).
ChatRequest FromGolden(const nlohmann::json& c) {
  ChatRequest r;
  r.add_generation_prompt = c.value("add_generation_prompt", true);
  if (c.contains("enable_thinking")) r.enable_thinking = c["enable_thinking"].get<bool>();
  for (const auto& t : c.value("tools", nlohmann::json::array()))
    r.tools_json.push_back(t.get<std::string>());
  for (const auto& m : c["messages"]) {
    const std::string role = m["role"];
    ChatMessage msg = Msg(role == "system"      ? ChatRole::kSystem
                          : role == "assistant" ? ChatRole::kAssistant
                          : role == "tool"      ? ChatRole::kTool
                                                : ChatRole::kUser,
                          m.value("content", ""));
    if (m.contains("name")) msg.name = m["name"].get<std::string>();
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
    msg.tool_call_id = m.value("tool_call_id", "");
    for (const auto& tc : m.value("tool_calls", nlohmann::json::array())) {
      msg.tool_calls.push_back({tc["id"], tc["name"], tc["arguments"]});
    }
    r.messages.push_back(std::move(msg));
  }
  return r;
}

TEST(ChatTemplate, MatchesJinjaGoldens) {
  std::ifstream in(std::string(TANDEM_TEXT_TESTDATA_DIR) + "/chat_goldens.json");
  ASSERT_TRUE(in.good());
  nlohmann::json goldens = nlohmann::json::parse(in);
  ASSERT_GE(goldens.size(), 8u);
  for (const auto& g : goldens) {
    SCOPED_TRACE(g["case"]["name"].get<std::string>());
    ChatRequest r = FromGolden(g["case"]);
    EXPECT_EQ(RenderKimiK2Chat(r).value(), g["expected"]["kimi_k2"].get<std::string>());
    EXPECT_EQ(RenderGlmChat(r).value(), g["expected"]["glm"].get<std::string>());
  }
}

}  // namespace
}  // namespace tandem::engine::text
