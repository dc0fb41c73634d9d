// CompletionResponseBuilder: /v1/completions bodies and chunks (object "text_completion").

#include <algorithm>

#include "agent/openai/response.h"
#include "agent/openai/response_json.h"

namespace tandem::agent::openai {

using engine::runtime::FinishReason;
using internal::Json;

struct CompletionResponseBuilder::State {
  ResponseOptions options;
  std::string echo;  // not yet sent (streaming) or not yet added (non-streaming)
  bool finished = false;
  std::string text;    // non-streaming: everything so far
  int64_t offset = 0;  // bytes of text before the next piece (echo included)
  Json logprobs;       // {"tokens", "token_logprobs", "top_logprobs", "text_offset"}

  State() { ResetLogprobs(); }

  void ResetLogprobs() {
    logprobs = Json{{"tokens", Json::array()},
                    {"token_logprobs", Json::array()},
                    {"top_logprobs", Json::array()},
                    {"text_offset", Json::array()}};
  }

  // The piece's text (after any unsent echo); its logprobs appended to `logprobs`.
  std::string Take(const TokenPiece& piece) {
    std::string out = std::move(echo);
    echo.clear();
    offset += static_cast<int64_t>(out.size());
    if (options.logprobs) AppendLogprobs(piece);
    offset += static_cast<int64_t>(piece.text.size());
    out += piece.text;
    return out;
  }

  // Offsets advance by each token's bytes when the tokenizer knows them; the piece's text length
  // resynchronizes them after every piece either way.
  void AppendLogprobs(const TokenPiece& piece) {
    int64_t token_offset = offset;
    const size_t n = std::min(piece.tokens.size(), piece.logprobs.size());
    for (size_t i = 0; i < n; ++i) {
      internal::TokenText token = internal::TokenTextOf(options.tokenizer, piece.tokens[i]);
      Json top = Json::object();
      if (i < piece.top_logprobs.size()) {
        const auto& alternatives = piece.top_logprobs[i];
        const size_t k =
            std::min(alternatives.size(), static_cast<size_t>(std::max(options.top_logprobs, 0)));
        for (size_t j = 0; j < k; ++j) {
          top[internal::TokenTextOf(options.tokenizer, alternatives[j].token).text] =
              internal::FiniteLogprob(alternatives[j].logprob);
        }
      }
      logprobs["tokens"].push_back(token.text);
      logprobs["token_logprobs"].push_back(internal::FiniteLogprob(piece.logprobs[i]));
      logprobs["top_logprobs"].push_back(std::move(top));
      logprobs["text_offset"].push_back(
          std::min(token_offset, offset + static_cast<int64_t>(piece.text.size())));
      if (token.known) token_offset += static_cast<int64_t>(token.text.size());
    }
  }

  std::string Chunk(std::string text, Json finish_reason) {
    Json choice;
    choice["index"] = 0;
    choice["text"] = std::move(text);
    if (options.logprobs && !logprobs["tokens"].empty()) {
      choice["logprobs"] = std::move(logprobs);
      ResetLogprobs();
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = std::move(finish_reason);
    Json chunk = internal::Head(options, "text_completion");
    chunk["choices"] = Json::array({std::move(choice)});
    if (options.include_usage) chunk["usage"] = nullptr;
    return internal::Sse(chunk);
  }
};

CompletionResponseBuilder::CompletionResponseBuilder(const ResponseOptions& options)
    : state_(std::make_unique<State>()) {
  state_->options = options;
}

CompletionResponseBuilder::~CompletionResponseBuilder() = default;

void CompletionResponseBuilder::SetEcho(std::string prompt_text) { state_->echo = std::move(prompt_text); }

std::vector<std::string> CompletionResponseBuilder::StreamPiece(const TokenPiece& piece) {
  std::vector<std::string> events;
  if (state_->finished) return events;
  std::string text = state_->Take(piece);
  if (!text.empty() || (state_->options.logprobs && !state_->logprobs["tokens"].empty())) {
    events.push_back(state_->Chunk(std::move(text), nullptr));
  }
  return events;
}

std::vector<std::string> CompletionResponseBuilder::StreamFinish(FinishReason reason, const Usage& usage) {
  std::vector<std::string> events;
  if (state_->finished) return events;
  state_->finished = true;
  std::string text = state_->Take(TokenPiece{});
  events.push_back(state_->Chunk(std::move(text), FinishReasonFor(reason, false)));
  if (state_->options.include_usage) {
    Json chunk = internal::Head(state_->options, "text_completion");
    chunk["choices"] = Json::array();
    chunk["usage"] = internal::UsageJson(usage);
    events.push_back(internal::Sse(chunk));
  }
  events.emplace_back(internal::kSseDone);
  return events;
}

void CompletionResponseBuilder::Add(const TokenPiece& piece) {
  if (state_->finished) return;
  state_->text += state_->Take(piece);
}

std::string CompletionResponseBuilder::Body(FinishReason reason, const Usage& usage) {
  if (!state_->finished) {
    state_->text += state_->Take(TokenPiece{});
    state_->finished = true;
  }
  Json choice;
  choice["index"] = 0;
  choice["text"] = state_->text;
  choice["logprobs"] = state_->options.logprobs ? state_->logprobs : Json(nullptr);
  choice["finish_reason"] = FinishReasonFor(reason, false);
  Json body = internal::Head(state_->options, "text_completion");
  body["choices"] = Json::array({std::move(choice)});
  body["usage"] = internal::UsageJson(usage);
  return internal::Dump(body);
}

}  // namespace tandem::agent::openai
