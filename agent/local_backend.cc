#include "agent/local_backend.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace tandem::agent {
namespace {

namespace runtime = engine::runtime;

class LocalStream : public GenerationStream {
 public:
  LocalStream(runtime::EngineLoop* loop, runtime::RequestId id, std::shared_ptr<OutputChannel> channel,
              std::atomic<int64_t>* in_flight)
      : loop_(loop), id_(id), channel_(std::move(channel)), in_flight_(in_flight) {}
  ~LocalStream() override {
    if (!finished_) (void)loop_->Cancel(id_);
    in_flight_->fetch_sub(1);
  }

  StatusOr<std::optional<StreamEvent>> Next(int64_t timeout_ms) override {
    std::vector<runtime::RequestOutput> ready = channel_->PopAll(std::chrono::milliseconds(timeout_ms));
    if (ready.empty()) return std::optional<StreamEvent>();
    std::optional<runtime::RequestOutput> out = std::move(ready.front());
    for (size_t i = 1; i < ready.size(); ++i) MergeOutput(*out, std::move(ready[i]));
    if (out->finish) finished_ = true;
    cached_ = std::max(cached_, out->cached_prompt_tokens);
    return std::optional<StreamEvent>(EventFromOutput(std::move(*out)));
  }

  void Cancel() override {
    if (!finished_) (void)loop_->Cancel(id_);
  }

  int64_t cached_tokens() const override { return cached_; }

 private:
  runtime::EngineLoop* loop_;
  runtime::RequestId id_;
  std::shared_ptr<OutputChannel> channel_;
  std::atomic<int64_t>* in_flight_;
  bool finished_ = false;
  int64_t cached_ = 0;
};

}  // namespace

StreamEvent EventFromOutput(runtime::RequestOutput output) {
  StreamEvent event;
  event.piece.tokens = std::move(output.new_tokens);
  event.piece.logprobs = std::move(output.new_token_logprobs);
  event.piece.top_logprobs = std::move(output.top_logprobs);
  event.piece.text = std::move(output.text_delta);
  event.finish = output.finish;
  event.finish_detail = std::move(output.finish_detail);
  return event;
}

StatusOr<std::unique_ptr<GenerationStream>> LocalBackend::Start(const GenerateCall& call) {
  runtime::Request request;
  request.prompt = call.prompt;
  request.params = call.params;
  request.tenant = call.tenant;
  auto channel = std::make_shared<OutputChannel>();
  runtime::EngineLoop::Sink sink = OutputChannel::SinkFor(channel);
  if (call.fault == "wedge") {
    // Test-only (fault injection): the step thread stalls in this request's first output, as a
    // wedged engine would; readiness must notice.
    sink = [sink = std::move(sink), stalled = false](runtime::RequestOutput out) mutable {
      if (!stalled) {
        stalled = true;
        std::this_thread::sleep_for(std::chrono::seconds(3));
      }
      sink(std::move(out));
    };
  }
  ASSIGN_OR_RETURN(runtime::RequestId id, host_->loop().Submit(request, std::move(sink)));
  in_flight_.fetch_add(1);
  return std::unique_ptr<GenerationStream>(new LocalStream(&host_->loop(), id, channel, &in_flight_));
}

}  // namespace tandem::agent
