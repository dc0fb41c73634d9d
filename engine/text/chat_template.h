#pragma once
// Chat templates rendered in C++: the exact prompt text the models' official Jinja chat templates
// produce for a conversation, without a Jinja engine. Which template versions these follow, and
// where we are unsure, is in docs/chat-templates.md; engine/text/testdata/ holds our Jinja
// reconstructions and the jinja2-rendered goldens the tests compare against.

#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/text/chat_types.h"

namespace tandem::engine::text {

// Kimi K2 (K2-Instruct-0905 template): optional `tool_declare` block with the tools as compact
// JSON, a default system prompt when the first message is not a system one, turns framed as
// <|im_user|>ROLE<|im_middle|>…<|im_end|>, tool calls in a <|tool_calls_section_begin|> block and
// tool results as "## Return of ID\n…". Arguments are copied verbatim.
// Errors: InvalidArgument when a tools_json entry is not valid JSON.
StatusOr<std::string> RenderKimiK2Chat(const ChatRequest& request);

// GLM 4.5/4.6 (also used for GLM 5.x until we can compare with its own template): "[gMASK]<sop>",
// a "# Tools" system block with one JSON schema per line, <|user|>/<|assistant|>/<|observation|>
// turns, "<think></think>" on assistant turns, tool calls as <tool_call>NAME / <arg_key> /
// <arg_value> lines (string values raw, others as JSON).
// Errors: InvalidArgument when a tool schema or a call's arguments is not valid JSON, or
// arguments is not a JSON object.
StatusOr<std::string> RenderGlmChat(const ChatRequest& request);

// Dispatches on `family`.
StatusOr<std::string> RenderChat(ChatFamily family, const ChatRequest& request);

// "kimi_k2" / "glm"; and the reverse (InvalidArgument for other names).
std::string_view ChatFamilyName(ChatFamily family);
StatusOr<ChatFamily> ParseChatFamily(std::string_view name);

}  // namespace tandem::engine::text
