#pragma once
// Internal to agent/openai: the chat-specific parts of a /v1/chat/completions body (messages,
// tools, tool_choice) and the sampling fields both endpoints share.

#include <optional>

#include "agent/openai/api.h"
#include "agent/openai/json_fields.h"
#include "engine/runtime/request_types.h"
#include "engine/text/chat_types.h"

namespace tandem::agent::openai::internal {

// `messages`: a non-empty array; roles system | developer (as system) | user | assistant | tool.
std::optional<ApiError> ParseMessages(const Json& body, std::vector<engine::text::ChatMessage>* out);

// `tools` (each kept as its JSON text) and `tool_choice` (a named function must be a tool).
std::optional<ApiError> ParseTools(const Json& body, ChatCompletionRequest* out);

// temperature, top_p, top_k, min_p, repetition_penalty, frequency_penalty, presence_penalty, seed,
// stop, stop_token_ids, max_tokens / max_completion_tokens, min_tokens, ignore_eos, n. Leaves
// params->logprobs alone (its shape differs by endpoint).
void ReadSampling(FieldReader& reader, const ParseOptions& options, engine::runtime::SamplingParams* params);

}  // namespace tandem::agent::openai::internal
