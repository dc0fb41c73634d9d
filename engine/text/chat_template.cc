#include "engine/text/chat_template.h"

#include <string>

namespace tandem::engine::text {

StatusOr<std::string> RenderChat(ChatFamily family, const ChatRequest& request) {
  switch (family) {
    case ChatFamily::kKimiK2: return RenderKimiK2Chat(request);
    case ChatFamily::kGlm: return RenderGlmChat(request);
  }
  return Status::InvalidArgument("unknown chat family");
}

std::string_view ChatFamilyName(ChatFamily family) {
  switch (family) {
    case ChatFamily::kKimiK2: return "kimi_k2";
    case ChatFamily::kGlm: return "glm";
  }
  return "unknown";
}

StatusOr<ChatFamily> ParseChatFamily(std::string_view name) {
  if (name == "kimi_k2") return ChatFamily::kKimiK2;
  if (name == "glm") return ChatFamily::kGlm;
  return Status::InvalidArgument("unknown chat family '" + std::string(name) + "' (want kimi_k2 or glm)");
}

}  // namespace tandem::engine::text
