// Kimi K2 chat template, following moonshotai/Kimi-K2-Instruct-0905's chat_template.jinja (our
// reconstruction: engine/text/testdata/kimi_k2.jinja).

#include <string>

#include "engine/text/chat_template.h"
#include "engine/text/py_json.h"

namespace tandem::engine::text {
namespace {

constexpr std::string_view kDefaultSystem = "You are Kimi, an AI assistant created by Moonshot AI.";

std::string_view RoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem: return "system";
    case ChatRole::kUser: return "user";
    case ChatRole::kAssistant: return "assistant";
    case ChatRole::kTool: return "tool";
  }
  return "user";
}

// The template prints `tools | tojson(separators=(',', ':'))` over the whole list.
StatusOr<std::string> ToolDeclaration(const ChatRequest& request) {
  std::string out = "<|im_system|>tool_declare<|im_middle|>[";
  for (size_t i = 0; i < request.tools_json.size(); ++i) {
    ASSIGN_OR_RETURN(nlohmann::ordered_json tool,
                     ParseOrderedJson(request.tools_json[i], "tools[" + std::to_string(i) + "]"));
    if (i > 0) out += ',';
    out += PyJsonDumps(tool, kPyCompactSeparators);
  }
  out += "]<|im_end|>";
  return out;
}

void AppendToolCalls(const ChatMessage& m, std::string& out) {
  out += m.content;
  out += "<|tool_calls_section_begin|>";
  for (const ChatToolCall& call : m.tool_calls) {
    // OpenAI sends arguments as a string, which the template prints unchanged.
    out += "<|tool_call_begin|>";
    out += call.id;
    out += "<|tool_call_argument_begin|>";
    out += call.arguments;
    out += "<|tool_call_end|>";
  }
  out += "<|tool_calls_section_end|>";
}

}  // namespace

StatusOr<std::string> RenderKimiK2Chat(const ChatRequest& request) {
  std::string out;
  if (!request.tools_json.empty()) {
    ASSIGN_OR_RETURN(out, ToolDeclaration(request));
  }
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const ChatMessage& m = request.messages[i];
    if (i == 0 && m.role != ChatRole::kSystem) {
      out += "<|im_system|>system<|im_middle|>";
      out += kDefaultSystem;
      out += "<|im_end|>";
    }
    // `message.get('name') or message['role']`: an empty name falls back to the role.
    std::string_view role_name = m.name && !m.name->empty() ? *m.name : RoleName(m.role);
    switch (m.role) {
      case ChatRole::kUser: out += "<|im_user|>"; break;
      case ChatRole::kAssistant: out += "<|im_assistant|>"; break;
      default: out += "<|im_system|>"; break;
    }
    out += role_name;
    out += "<|im_middle|>";
    if (m.role == ChatRole::kAssistant && !m.tool_calls.empty()) {
      AppendToolCalls(m, out);
    } else if (m.role == ChatRole::kTool) {
      out += "## Return of ";
      out += m.tool_call_id;
      out += '\n';
      out += m.content;
    } else {
      out += m.content;
    }
    out += "<|im_end|>";
  }
  if (request.add_generation_prompt) out += "<|im_assistant|>assistant<|im_middle|>";
  return out;
}

}  // namespace tandem::engine::text
