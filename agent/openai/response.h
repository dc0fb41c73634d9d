#pragma once
// The OpenAI-compatible API's response side: the engine's output, piece by piece, turned into a
// chat.completion / text_completion body or into server-sent events (`data: {...}\n\n`, ending
// with `data: [DONE]\n\n`).
//
// Chat: content goes through the model family's tool-call parser (engine/text/tool_call_parser.h)
// when tools are enabled (tools given, tool_choice not "none"), so calls come back as
// `tool_calls` (streamed as `delta.tool_calls`: one delta per call with its id, type and name,
// then its arguments in pieces of at most 16 bytes); GLM's <think>...</think> goes to
// `reasoning_content` (the rule is in agent/openai/reasoning_splitter.h; when the prompt already
// opened the think block, set ResponseOptions::prompt_opened_think). finish_reason is
// "tool_calls" when the response made calls and the engine stopped, else the engine's ("stop",
// "length", "abort").
// Logprobs (when requested) follow OpenAI's shape: {"content": [{"token", "logprob", "bytes",
// "top_logprobs": [...]}]} for chat, {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
// for completions; in a stream, a token's logprobs ride on the first chunk sent after it (text
// held back as a possible marker delays them), so each entry is sent exactly once, in order.
// Not thread-safe: one builder per response.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/openai/api.h"
#include "common/status.h"
#include "engine/runtime/request_types.h"
#include "engine/text/chat_types.h"

namespace tandem::engine::text {
class Tokenizer;
class ToolCallParser;
}  // namespace tandem::engine::text

namespace tandem::agent::openai {

// What the engine produced since the last piece (one RequestOutput, or one gRPC token event).
struct TokenPiece {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;                                           // parallel to tokens, if any
  std::vector<std::vector<engine::runtime::TokenLogprob>> top_logprobs;  // parallel to tokens, if any
  std::string text;                                                      // the detokenized delta
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt_tokens_details.cached_tokens
};

struct ResponseOptions {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  std::string model;    // echoed back
  int64_t created = 0;  // unix seconds
  engine::text::ChatFamily family = engine::text::ChatFamily::kKimiK2;
  std::vector<std::string> tools_json;  // the request's tools (GLM argument types)
  bool tools_enabled = false;           // parse tool calls
  // The request's function names (ChatCompletionRequest::tool_names). A parsed call naming any other
  // function is dropped (its markup is consumed, nothing reaches the client; counted in
  // dropped_tool_calls()), as SGLang's parsers do by default: a client must never be handed a call
  // to a tool it did not offer for this request. Empty (a builder used without a request): nothing
  // is dropped.
  std::vector<std::string> tool_names;
  // True passes calls to functions outside tool_names on as the model wrote them (to measure a
  // model's own validity).
  bool forward_unknown_tool_calls = false;
  bool reasoning = false;  // split <think> into reasoning_content (GLM)
  // The prompt ended inside an open think block (a template that writes "<think>" itself), so the
  // output starts as reasoning. GLM's template here does not: the model writes "<think>".
  bool prompt_opened_think = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool include_usage = false;                          // streaming: a last chunk with usage
  const engine::text::Tokenizer* tokenizer = nullptr;  // logprob token strings; may be null
};

// Maps an engine finish (and whether calls were made) to OpenAI's finish_reason.
std::string FinishReasonFor(engine::runtime::FinishReason reason, bool made_tool_calls);

class ChatResponseBuilder {
 public:
  // InvalidArgument when a tools_json entry is not valid JSON.
  static StatusOr<std::unique_ptr<ChatResponseBuilder>> Create(const ResponseOptions& options);
  ~ChatResponseBuilder();

  // Streaming: the SSE events for this piece (the first call also sends the role delta). May be
  // empty (text held back while it could be a marker).
  std::vector<std::string> StreamPiece(const TokenPiece& piece);
  // Streaming end: what was held back, the finish_reason chunk, the usage chunk when asked for,
  // and `data: [DONE]`.
  std::vector<std::string> StreamFinish(engine::runtime::FinishReason reason, const Usage& usage);

  // Non-streaming: accumulate, then the whole chat.completion body.
  void Add(const TokenPiece& piece);
  std::string Body(engine::runtime::FinishReason reason, const Usage& usage);

  bool made_tool_calls() const;
  // Calls dropped so far for naming a function the request did not offer.
  int dropped_tool_calls() const;

 private:
  struct State;
  explicit ChatResponseBuilder(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class CompletionResponseBuilder {
 public:
  explicit CompletionResponseBuilder(const ResponseOptions& options);
  ~CompletionResponseBuilder();
  // echo: the prompt text (and its tokens, for logprobs) come first.
  void SetEcho(std::string prompt_text);
  std::vector<std::string> StreamPiece(const TokenPiece& piece);
  std::vector<std::string> StreamFinish(engine::runtime::FinishReason reason, const Usage& usage);
  void Add(const TokenPiece& piece);
  std::string Body(engine::runtime::FinishReason reason, const Usage& usage);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// An error inside a stream: `data: {"error": {...}}\n\n` then `data: [DONE]\n\n`.
std::vector<std::string> StreamErrorEvents(const ApiError& error);

}  // namespace tandem::agent::openai
