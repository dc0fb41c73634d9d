#pragma once
// The conversation a chat template renders: plain structs, filled by the agent from an OpenAI
// /v1/chat/completions request. JSON-valued fields (tool schemas, call arguments) stay JSON text so
// their key order survives to the prompt exactly as the client sent it.

#include <optional>
#include <string>
#include <vector>

namespace tandem::engine::text {

enum class ChatRole { kSystem, kUser, kAssistant, kTool };

// One call an assistant turn made (OpenAI `tool_calls[i]`).
struct ChatToolCall {
  std::string id;         // "functions.get_weather:0" (Kimi) or any client id ("call_1")
  std::string name;       // function.name
  std::string arguments;  // function.arguments: a JSON object as text
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  // OpenAI's optional participant name; Kimi's template shows it in place of the role.
  std::optional<std::string> name;
  std::vector<ChatToolCall> tool_calls;  // assistant only
  std::string tool_call_id;              // tool only: the call this message answers
  // Assistant reasoning from an earlier turn (GLM `reasoning_content`); unset means none given.
  std::optional<std::string> reasoning_content;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  // OpenAI tool declarations, each `{"type":"function","function":{"name":..,"parameters":..}}`.
  std::vector<std::string> tools_json;
  bool add_generation_prompt = true;
  // GLM's thinking switch (`enable_thinking` in the template): unset = the template's default
  // (thinking on); false appends "/nothink" to user turns and an empty think block to the prompt.
  std::optional<bool> enable_thinking;
};

// Which chat format a model speaks (template and tool-call syntax).
enum class ChatFamily {
  kKimiK2,  // Kimi K2 / K2.x: <|im_user|>…<|im_middle|>…<|im_end|>, <|tool_calls_section_begin|>
  kGlm,     // GLM 4.5 / 4.6 / 5.x: [gMASK]<sop><|user|>…, <tool_call>NAME<arg_key>…
};

}  // namespace tandem::engine::text
