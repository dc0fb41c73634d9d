#pragma once
// Internal to agent/openai: the JSON pieces both response builders share (events, usage,
// logprob entries) and the one serializer, which never throws: model text may hold invalid UTF-8,
// which comes out as U+FFFD.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/openai/response.h"
#include "engine/runtime/request_types.h"

namespace tandem::agent::openai::internal {

using Json = nlohmann::ordered_json;

// Compact JSON; invalid UTF-8 replaced, never throws.
std::string Dump(const Json& value);
// One server-sent event: "data: <json>\n\n".
std::string Sse(const Json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
Json UsageJson(const Usage& usage);

// {"id", "object", "created", "model"}: the head of every body and chunk.
Json Head(const ResponseOptions& options, std::string_view object);

// A token's text (its bytes, as the tokenizer has them; "token_id:N" without a tokenizer or for an
// unknown id) and whether it came from the tokenizer.
struct TokenText {
  std::string text;
  bool known = false;
};
TokenText TokenTextOf(const engine::text::Tokenizer* tokenizer, int32_t token);

// A logprob as JSON can carry it: -inf (a token the model ruled out) becomes -9999.0, as OpenAI.
double FiniteLogprob(float logprob);

// Chat logprob entries of a piece, one per token that has a logprob: {"token", "logprob",
// "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]} with at most options.top_logprobs
// alternatives each. Appended to `out` (a JSON array).
void AppendChatLogprobs(const ResponseOptions& options, const TokenPiece& piece, Json& out);

// Splits `text` into pieces of at most `max_bytes` (>= 4) that do not cut a UTF-8 character
// (invalid UTF-8 is cut anywhere). Empty text gives no pieces.
std::vector<std::string_view> SplitUtf8(std::string_view text, size_t max_bytes);

}  // namespace tandem::agent::openai::internal
