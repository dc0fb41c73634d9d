// GLM chat template, following zai-org/GLM-4.5's (and GLM-4.6's) chat_template.jinja (our
// reconstruction: engine/text/testdata/glm.jinja). Whitespace here is what Hugging Face's Jinja
// settings (trim_blocks, lstrip_blocks) leave of that template.

#include <string>
#include <string_view>

#include "engine/text/chat_template.h"
#include "engine/text/py_json.h"

namespace tandem::engine::text {
namespace {

constexpr std::string_view kToolsHeader =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr std::string_view kToolsFooter =
    "</tools>\n\nFor each function call, output the function name and arguments within the following "
    "XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
    "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";

// Python's str.strip() for ASCII whitespace (Python also strips Unicode spaces; see the docs).
constexpr std::string_view kSpaces = " \t\n\r\f\v";
std::string_view Strip(std::string_view s) {
  size_t begin = s.find_first_not_of(kSpaces);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpaces) - begin + 1);
}
std::string_view StripChar(std::string_view s, char c, bool left) {
  if (left) {
    while (!s.empty() && s.front() == c) s.remove_prefix(1);
  } else {
    while (!s.empty() && s.back() == c) s.remove_suffix(1);
  }
  return s;
}

// reasoning_content given, or split out of "<think>…</think>answer" as the template does.
void SplitReasoning(const ChatMessage& m, std::string_view& reasoning, std::string_view& content) {
  content = m.content;
  reasoning = {};
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
    return;
  }
  constexpr std::string_view kEnd = "</think>";
  size_t first_end = content.find(kEnd);
  if (first_end == std::string_view::npos) return;
  // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
  std::string_view before = StripChar(content.substr(0, first_end), '\n', /*left=*/false);
  size_t open = before.rfind("<think>");
  if (open != std::string_view::npos) before = before.substr(open + 7);
  reasoning = StripChar(before, '\n', /*left=*/true);
  // content.split('</think>')[-1].lstrip('\n')
  content = StripChar(content.substr(content.rfind(kEnd) + kEnd.size()), '\n', /*left=*/true);
}

Status AppendToolCall(const ChatToolCall& call, std::string& out) {
  ASSIGN_OR_RETURN(nlohmann::ordered_json args,
                   ParseOrderedJson(call.arguments, "arguments of " + call.name));
  if (!args.is_object()) return Status::InvalidArgument("arguments of " + call.name + ": not a JSON object");
  out += "\n<tool_call>";
  out += call.name;
  out += '\n';
  for (const auto& [key, value] : args.items()) {
    out += "<arg_key>";
    out += key;
    out += "</arg_key>\n<arg_value>";
    out += value.is_string() ? value.get<std::string>() : PyJsonDumps(value, kPyDefaultSeparators);
    out += "</arg_value>\n";
  }
  out += "</tool_call>";
  return Status::Ok();
}

Status AppendAssistant(const ChatMessage& m, bool after_last_user, std::string& out) {
  std::string_view reasoning, content;
  SplitReasoning(m, reasoning, content);
  out += "<|assistant|>";
  if (after_last_user && !reasoning.empty()) {
    out += "\n<think>";
    out += Strip(reasoning);
    out += "</think>";
  } else {
    out += "\n<think></think>";
  }
  if (!Strip(content).empty()) {
    out += '\n';
    out += Strip(content);
  }
  for (const ChatToolCall& call : m.tool_calls) RETURN_IF_ERROR(AppendToolCall(call, out));
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> RenderGlmChat(const ChatRequest& request) {
  std::string out = "[gMASK]<sop>";
  if (!request.tools_json.empty()) {
    out += kToolsHeader;
    for (size_t i = 0; i < request.tools_json.size(); ++i) {
      ASSIGN_OR_RETURN(nlohmann::ordered_json tool,
                       ParseOrderedJson(request.tools_json[i], "tools[" + std::to_string(i) + "]"));
      out += PyJsonDumps(tool, kPyDefaultSeparators);
      out += '\n';
    }
    out += kToolsFooter;
  }
  const auto& messages = request.messages;
  int last_user = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == ChatRole::kUser) last_user = static_cast<int>(i);
  }
  const bool no_think = request.enable_thinking.has_value() && !*request.enable_thinking;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    switch (m.role) {
      case ChatRole::kUser:
        out += "<|user|>\n";
        out += m.content;
        if (no_think && !std::string_view(m.content).ends_with("/nothink")) out += "/nothink";
        break;
      case ChatRole::kAssistant:
        RETURN_IF_ERROR(AppendAssistant(m, static_cast<int>(i) > last_user, out));
        break;
      case ChatRole::kTool:
        // Consecutive tool results share one <|observation|> turn.
        if (i == 0 || messages[i - 1].role != ChatRole::kTool) out += "<|observation|>";
        out += "\n<tool_response>\n";
        out += m.content;
        out += "\n</tool_response>";
        break;
      case ChatRole::kSystem:
        out += "<|system|>\n";
        out += m.content;
        break;
    }
  }
  if (request.add_generation_prompt) {
    out += "<|assistant|>";
    if (no_think) out += "\n<think></think>";
  }
  return out;
}

}  // namespace tandem::engine::text
