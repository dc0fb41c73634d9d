#pragma once
// EngineHost: the engine of one agent (prefill, decode or standalone role) and its step loop,
// opened from the agent's configuration. HTTP and gRPC threads reach the engine only through
// loop(), never directly.
//
// OutputChannel carries one request's outputs from the step thread (the EngineLoop sink) to the
// thread serving that request, which waits on it with a timeout so it can also watch its client.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/config.h"
#include "common/status.h"
#include "engine/runtime/engine_loop.h"
#include "engine/runtime/serving_engine.h"
#include "engine/text/chat_types.h"

namespace tandem::agent {

// Thread-safe FIFO of one request's outputs. Push never blocks.
class OutputChannel {
 public:
  void Push(engine::runtime::RequestOutput output);
  // The next output, or nullopt when none arrives within `timeout`.
  std::optional<engine::runtime::RequestOutput> Pop(std::chrono::milliseconds timeout);
  // Every output queued now, waiting up to `timeout` for the first (empty: none came). Serving
  // threads that fall behind the step thread send what piled up as one message.
  std::vector<engine::runtime::RequestOutput> PopAll(std::chrono::milliseconds timeout);

  // A sink for EngineLoop that pushes into `channel` (kept alive by the sink).
  static engine::runtime::EngineLoop::Sink SinkFor(std::shared_ptr<OutputChannel> channel);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<engine::runtime::RequestOutput> queue_;
};

// Appends `next` to `into` (tokens, logprobs, text; the finish and `exported` of the later one).
void MergeOutput(engine::runtime::RequestOutput& into, engine::runtime::RequestOutput&& next);

class EngineHost {
 public:
  // The engine role follows the agent role (standalone: unified, prefill: prefill-only, decode:
  // decode-only); weights, KV dtype and bytes, threads, page tags (integrity), prefix cache and the
  // transfer timeout come from `config`. InvalidArgument for a router config; the engine's errors
  // otherwise (a missing model directory, a checkpoint that does not hold config.weights, ...).
  static StatusOr<std::unique_ptr<EngineHost>> Open(const AgentConfig& config);
  ~EngineHost();  // Stop()

  engine::runtime::EngineLoop& loop() { return *loop_; }
  engine::runtime::ServingEngine& serving() { return *serving_; }
  // The model directory's tokenizer (nullptr for a dummy model) and chat family.
  const engine::text::Tokenizer* tokenizer() const { return serving_->tokenizer(); }
  engine::text::ChatFamily chat_family() const { return serving_->chat_family(); }
  size_t page_tokens() const { return page_tokens_; }
  int64_t max_context_tokens() const;

  // Stops the loop: every live request ends with an abort (its sink is told). Idempotent.
  void Stop();

 private:
  EngineHost() = default;
  std::unique_ptr<engine::runtime::ServingEngine> serving_;
  std::unique_ptr<engine::runtime::EngineLoop> loop_;
  size_t page_tokens_ = 16;
};

// The ServingConfig an agent config asks for (exposed for tests).
StatusOr<engine::runtime::ServingConfig> ServingConfigFor(const AgentConfig& config);

}  // namespace tandem::agent
