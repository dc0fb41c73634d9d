#pragma once
// The OpenAI-compatible API's request side: /v1/chat/completions and /v1/completions bodies
// parsed and validated into plain structs the agent hands to the engine, and OpenAI's error shape.
//
// Validation follows OpenAI and vLLM: bad JSON, an ill-typed or out-of-range field is a 400
// naming the field (`param`); unknown fields are ignored (clients send newer ones); JSON nested
// deeper than ParseOptions::max_json_depth is a 400. Never throws.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/runtime/request_types.h"
#include "engine/text/chat_types.h"

namespace tandem::agent::openai {

// OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  // invalid_request_error (400, 404, 413), authentication_error (401), rate_limit_error (429),
  // server_error (500, 503)
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending field ("messages[1].content"), or empty (JSON null)
  std::string code;   // e.g. "model_not_found", or empty (JSON null)
};

std::string ErrorJson(const ApiError& error);

enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

struct ParseOptions {
  int max_json_depth = 64;
  int32_t default_max_tokens = 256;  // when the body sets neither max_tokens nor max_completion_tokens
  int32_t max_max_tokens = 1 << 20;
};

struct ChatCompletionRequest {
  std::string model;
  // messages -> chat.messages (content as a string or an array of {"type":"text","text"} parts;
  // assistant tool_calls; tool messages' tool_call_id), tools -> chat.tools_json (each tool's JSON
  // text as sent), chat_template_kwargs.enable_thinking -> chat.enable_thinking.
  engine::text::ChatRequest chat;
  // temperature, top_p, top_k, min_p, repetition_penalty, frequency_penalty, presence_penalty,
  // seed, stop (string or array), max_completion_tokens (else max_tokens, else the default),
  // min_tokens, ignore_eos; logprobs: true -> params.logprobs = top_logprobs (0..20).
  engine::runtime::SamplingParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  ToolChoice tool_choice = ToolChoice::kAuto;  // "auto" | "none" | "required" | {"type":"function",...}
  std::string tool_choice_name;                // kFunction only
  std::vector<std::string> tool_names;         // tools[i].function.name, in order (non-empty)
};

// /v1/completions: prompt is a string, or an array of token ids (one prompt only: n = 1).
struct CompletionRequest {
  std::string model;
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  engine::runtime::SamplingParams params;  // as chat; logprobs: an integer 0..5 -> params.logprobs
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
};

// Errors: 400 with `param` set for the field at fault; n other than 1 is a 400 ("n": only 1 is
// supported); an empty messages array is a 400.
std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(std::string_view body,
                                                                         const ParseOptions& options = {});
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body,
                                                                 const ParseOptions& options = {});

}  // namespace tandem::agent::openai
