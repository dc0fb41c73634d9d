#include "agent/openai/response_json.h"

#include <algorithm>
#include <cmath>

#include "engine/text/tokenizer.h"

namespace tandem::agent::openai::internal {

std::string Dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string Sse(const Json& value) {
  std::string out = "data: ";
  out += Dump(value);
  out += "\n\n";
  return out;
}

Json UsageJson(const Usage& usage) {
  Json out;
  out["prompt_tokens"] = usage.prompt_tokens;
  out["completion_tokens"] = usage.completion_tokens;
  out["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  out["prompt_tokens_details"] = Json{{"cached_tokens", usage.cached_tokens}};
  return out;
}

Json Head(const ResponseOptions& options, std::string_view object) {
  Json out;
  out["id"] = options.id;
  out["object"] = object;
  out["created"] = options.created;
  out["model"] = options.model;
  return out;
}

TokenText TokenTextOf(const engine::text::Tokenizer* tokenizer, int32_t token) {
  if (tokenizer != nullptr) {
    if (std::optional<std::string_view> bytes = tokenizer->TokenBytes(token)) {
      return TokenText{std::string(*bytes), true};
    }
  }
  return TokenText{"token_id:" + std::to_string(token), false};
}

double FiniteLogprob(float logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

namespace {

Json Bytes(const TokenText& text) {
  if (!text.known) return nullptr;
  Json out = Json::array();
  for (char c : text.text) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

Json Alternative(const ResponseOptions& options, int32_t token, float logprob) {
  TokenText text = TokenTextOf(options.tokenizer, token);
  Json out;
  out["token"] = text.text;
  out["logprob"] = FiniteLogprob(logprob);
  out["bytes"] = Bytes(text);
  return out;
}

}  // namespace

void AppendChatLogprobs(const ResponseOptions& options, const TokenPiece& piece, Json& out) {
  const size_t n = std::min(piece.tokens.size(), piece.logprobs.size());
  for (size_t i = 0; i < n; ++i) {
    Json entry = Alternative(options, piece.tokens[i], piece.logprobs[i]);
    Json top = Json::array();
    if (i < piece.top_logprobs.size()) {
      const auto& alternatives = piece.top_logprobs[i];
      const size_t k = std::min(alternatives.size(), static_cast<size_t>(std::max(options.top_logprobs, 0)));
      for (size_t j = 0; j < k; ++j)
        top.push_back(Alternative(options, alternatives[j].token, alternatives[j].logprob));
    }
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
}

std::vector<std::string_view> SplitUtf8(std::string_view text, size_t max_bytes) {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    size_t n = std::min(text.size(), max_bytes);
    if (n < text.size()) {
      // Back up over continuation bytes (10xxxxxx) to the start of the character at the cut.
      size_t back = n;
      while (back > 0 && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
      if (back > 0) n = back;
    }
    pieces.push_back(text.substr(0, n));
    text.remove_prefix(n);
  }
  return pieces;
}

}  // namespace tandem::agent::openai::internal
