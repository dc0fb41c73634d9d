#pragma once
// What the OpenAI front (api_server.h) asks of whatever generates tokens: the local engine
// (standalone role, local_backend.h) or a (prefill, decode) pair of remote agents (router role,
// router.h). One GenerationStream per request.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/openai/response.h"
#include "common/status.h"
#include "engine/runtime/request_types.h"

namespace tandem::agent {

struct GenerateCall {
  std::string request_id;  // the API's id ("chatcmpl-..."), for logs
  std::vector<int32_t> prompt;
  engine::runtime::SamplingParams params;
  std::string tenant;  // from the API key; salts prefix sharing
  std::string fault;   // test-only (x-tandem-fault), honoured with --enable-fault-injection
  // True once the client has gone away: a backend that blocks in Start (the router, during the
  // prefill) polls it and gives up. May be empty.
  std::function<bool()> cancelled;
};

struct StreamEvent {
  openai::TokenPiece piece;
  std::optional<engine::runtime::FinishReason> finish;  // set on the last event
  std::string finish_detail;
};

// Appends `next` to `into`: its tokens, logprobs and text, and its finish.
inline void MergeEvent(StreamEvent& into, StreamEvent&& next) {
  openai::TokenPiece& p = into.piece;
  p.tokens.insert(p.tokens.end(), next.piece.tokens.begin(), next.piece.tokens.end());
  p.logprobs.insert(p.logprobs.end(), next.piece.logprobs.begin(), next.piece.logprobs.end());
  for (auto& top : next.piece.top_logprobs) p.top_logprobs.push_back(std::move(top));
  p.text += next.piece.text;
  if (next.finish) into.finish = next.finish;
  if (!next.finish_detail.empty()) into.finish_detail = std::move(next.finish_detail);
}

class GenerationStream {
 public:
  virtual ~GenerationStream() = default;
  // The next event, waiting at most timeout_ms: nullopt when none came. An error means the request
  // failed (the peer died, the transfer failed) and the stream is over.
  virtual StatusOr<std::optional<StreamEvent>> Next(int64_t timeout_ms) = 0;
  // Ends the request everywhere it runs; Next then returns its finish or an error. Idempotent.
  virtual void Cancel() = 0;
  // Prompt tokens served from a prefix cache (usage.prompt_tokens_details.cached_tokens).
  virtual int64_t cached_tokens() const { return 0; }
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;
  // Starts a request. Errors map to HTTP statuses: InvalidArgument/OutOfRange 400,
  // ResourceExhausted 429, Unavailable 503, anything else 500.
  virtual StatusOr<std::unique_ptr<GenerationStream>> Start(const GenerateCall& call) = 0;
  // In-flight requests (for 429 admission and metrics).
  virtual int64_t in_flight() const = 0;
};

}  // namespace tandem::agent
