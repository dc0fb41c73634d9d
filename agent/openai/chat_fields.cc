#include "agent/openai/chat_fields.h"

#include <algorithm>
#include <string>

namespace tandem::agent::openai::internal {
namespace {

using engine::text::ChatMessage;
using engine::text::ChatRole;
using engine::text::ChatToolCall;

std::optional<ChatRole> RoleFromName(std::string_view name) {
  if (name == "system" || name == "developer") return ChatRole::kSystem;
  if (name == "user") return ChatRole::kUser;
  if (name == "assistant") return ChatRole::kAssistant;
  if (name == "tool") return ChatRole::kTool;
  return std::nullopt;
}

// content: a string, or an array of {"type":"text","text":...} parts, concatenated as they are.
// Absent or null is allowed for assistant turns only (a turn that only calls tools).
void ReadContent(FieldReader& reader, ChatMessage* m) {
  const Json* content = reader.Find("content");
  if (content == nullptr) {
    if (m->role != ChatRole::kAssistant)
      reader.Fail("content", "'" + reader.Param("content") + "' is required");
    return;
  }
  if (content->is_string()) {
    m->content = content->get<std::string>();
    return;
  }
  if (!content->is_array()) {
    reader.Fail("content", "'" + reader.Param("content") + "' must be a string or an array of content parts");
    return;
  }
  for (size_t j = 0; j < content->size() && reader.ok(); ++j) {
    const Json& part = (*content)[j];
    const std::string key = "content[" + std::to_string(j) + "]";
    if (!part.is_object()) {
      reader.Fail(key, "'" + reader.Param(key) + "' must be an object");
      return;
    }
    FieldReader part_reader(part, reader.Param(key) + ".");
    std::string type;
    std::string text;
    part_reader.RequiredString("type", &type);
    if (part_reader.ok() && type != "text") {
      part_reader.Fail("type", "content part type '" + type + "' is not supported (only 'text')");
    }
    part_reader.RequiredString("text", &text);
    reader.Adopt(part_reader);
    if (!reader.ok()) return;
    m->content += text;
  }
}

void ReadToolCalls(FieldReader& reader, ChatMessage* m) {
  const Json* calls = reader.Array("tool_calls");
  if (calls == nullptr) return;
  for (size_t j = 0; j < calls->size(); ++j) {
    const Json& call = (*calls)[j];
    const std::string key = "tool_calls[" + std::to_string(j) + "]";
    if (!call.is_object()) return reader.Fail(key, "'" + reader.Param(key) + "' must be an object");
    FieldReader r(call, reader.Param(key) + ".");
    ChatToolCall out;
    std::string type = "function";
    r.RequiredString("id", &out.id);
    r.String("type", &type);
    if (r.ok() && type != "function") r.Fail("type", "'" + r.Param("type") + "' must be 'function'");
    if (r.ok() && r.Find("function") == nullptr)
      r.Fail("function", "'" + r.Param("function") + "' is required");
    const Json* function = r.Object("function");
    if (function != nullptr) {
      FieldReader f(*function, r.Param("function") + ".");
      f.RequiredString("name", &out.name);
      // Some clients send the arguments as an object rather than its text: accept both.
      const Json* args = f.Find("arguments");
      if (args != nullptr && args->is_object()) {
        out.arguments = args->dump();
      } else {
        f.RequiredString("arguments", &out.arguments);
      }
      r.Adopt(f);
    }
    reader.Adopt(r);
    if (!reader.ok()) return;
    m->tool_calls.push_back(std::move(out));
  }
}

std::optional<ApiError> ParseMessage(const Json& value, size_t i, ChatMessage* m) {
  const std::string prefix = "messages[" + std::to_string(i) + "]";
  if (!value.is_object()) return BadRequest("'" + prefix + "' must be an object", prefix);
  FieldReader r(value, prefix + ".");
  std::string role;
  if (!r.RequiredString("role", &role)) return r.error();
  std::optional<ChatRole> parsed = RoleFromName(role);
  if (!parsed) {
    return BadRequest("'" + r.Param("role") + "' must be one of system, developer, user, assistant, tool",
                      r.Param("role"));
  }
  m->role = *parsed;
  ReadContent(r, m);
  std::string name;
  if (r.String("name", &name)) m->name = name;
  if (m->role == ChatRole::kAssistant) {
    ReadToolCalls(r, m);
    std::string reasoning;
    if (r.String("reasoning_content", &reasoning)) m->reasoning_content = reasoning;
  }
  if (m->role == ChatRole::kTool) r.RequiredString("tool_call_id", &m->tool_call_id);
  if (!r.ok()) return r.error();
  return std::nullopt;
}

std::optional<ApiError> ParseToolChoice(const Json& body, const std::vector<std::string>& names,
                                        ChatCompletionRequest* out) {
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return std::nullopt;
  const Json& choice = *it;
  const std::string kBad =
      "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
      "\"function\": {\"name\": ...}}";
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "auto") {
      out->tool_choice = ToolChoice::kAuto;
    } else if (s == "none") {
      out->tool_choice = ToolChoice::kNone;
    } else if (s == "required") {
      if (names.empty()) return BadRequest("'tool_choice' \"required\" needs 'tools'", "tool_choice");
      out->tool_choice = ToolChoice::kRequired;
    } else {
      return BadRequest(kBad, "tool_choice");
    }
    return std::nullopt;
  }
  if (!choice.is_object()) return BadRequest(kBad, "tool_choice");
  auto type = choice.find("type");
  auto function = choice.find("function");
  if (type == choice.end() || *type != "function" || function == choice.end() || !function->is_object()) {
    return BadRequest(kBad, "tool_choice");
  }
  auto name = function->find("name");
  if (name == function->end() || !name->is_string()) return BadRequest(kBad, "tool_choice");
  out->tool_choice_name = name->get<std::string>();
  if (std::find(names.begin(), names.end(), out->tool_choice_name) == names.end()) {
    return BadRequest("'tool_choice' names function '" + out->tool_choice_name + "', which is not in 'tools'",
                      "tool_choice");
  }
  out->tool_choice = ToolChoice::kFunction;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseMessages(const Json& body, std::vector<ChatMessage>* out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return BadRequest("'messages' is required", "messages");
  if (!it->is_array()) return BadRequest("'messages' must be an array", "messages");
  if (it->empty()) return BadRequest("'messages' must not be empty", "messages");
  out->resize(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    if (auto error = ParseMessage((*it)[i], i, &(*out)[i])) return error;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseTools(const Json& body, ChatCompletionRequest* out) {
  FieldReader reader(body, "");
  const Json* tools = reader.Array("tools");
  if (!reader.ok()) return reader.error();
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string key = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) return BadRequest("'" + key + "' must be an object", key);
    FieldReader r(tool, key + ".");
    std::string type;
    r.RequiredString("type", &type);
    if (r.ok() && type != "function") r.Fail("type", "'" + r.Param("type") + "' must be 'function'");
    if (r.ok() && r.Find("function") == nullptr)
      r.Fail("function", "'" + r.Param("function") + "' is required");
    const Json* function = r.Object("function");
    if (!r.ok()) return r.error();
    FieldReader f(*function, r.Param("function") + ".");
    std::string name;
    std::string description;
    f.RequiredString("name", &name);
    f.String("description", &description);
    f.Object("parameters");
    if (f.ok() && name.empty()) f.Fail("name", "'" + f.Param("name") + "' must not be empty");
    if (!f.ok()) return f.error();
    out->tool_names.push_back(name);
    out->chat.tools_json.push_back(tool.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  return ParseToolChoice(body, out->tool_names, out);
}

}  // namespace tandem::agent::openai::internal
