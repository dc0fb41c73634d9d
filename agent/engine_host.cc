#include "agent/engine_host.h"

#include <algorithm>
#include <utility>

#include "engine/model/model_config.h"

namespace tandem::agent {

namespace runtime = engine::runtime;

void OutputChannel::Push(runtime::RequestOutput output) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(output));
  }
  cv_.notify_one();
}

std::optional<runtime::RequestOutput> OutputChannel::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
  runtime::RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

std::vector<runtime::RequestOutput> OutputChannel::PopAll(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<runtime::RequestOutput> out;
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return out;
  out.reserve(queue_.size());
  for (runtime::RequestOutput& o : queue_) out.push_back(std::move(o));
  queue_.clear();
  return out;
}

void MergeOutput(runtime::RequestOutput& into, runtime::RequestOutput&& next) {
  into.new_tokens.insert(into.new_tokens.end(), next.new_tokens.begin(), next.new_tokens.end());
  into.new_token_logprobs.insert(into.new_token_logprobs.end(), next.new_token_logprobs.begin(),
                                 next.new_token_logprobs.end());
  for (auto& top : next.top_logprobs) into.top_logprobs.push_back(std::move(top));
  into.text_delta += next.text_delta;
  if (next.finish) into.finish = next.finish;
  if (!next.finish_detail.empty()) into.finish_detail = std::move(next.finish_detail);
  into.exported = into.exported || next.exported;
  into.cached_prompt_tokens = std::max(into.cached_prompt_tokens, next.cached_prompt_tokens);
}

runtime::EngineLoop::Sink OutputChannel::SinkFor(std::shared_ptr<OutputChannel> channel) {
  return [channel = std::move(channel)](runtime::RequestOutput out) { channel->Push(std::move(out)); };
}

StatusOr<runtime::ServingConfig> ServingConfigFor(const AgentConfig& config) {
  runtime::ServingConfig sc;
  switch (config.role) {
    case Role::kStandalone: sc.role = runtime::EngineRole::kUnified; break;
    case Role::kPrefill: sc.role = runtime::EngineRole::kPrefillOnly; break;
    case Role::kDecode: sc.role = runtime::EngineRole::kDecodeOnly; break;
    case Role::kRouter: return Status::InvalidArgument("a router hosts no engine");
  }
  sc.model_dir = config.model_path;
  sc.dummy_preset = config.dummy_preset;
  sc.dummy_seed = config.dummy_seed;
  sc.weights = config.weights;
  sc.kv_dtype = config.kv_cache;
  sc.kv_bytes = config.kv_cache_bytes;
  sc.threads = config.threads;
  sc.tensor_parallel = config.tensor_parallel;
  sc.integrity = config.page_tags;
  sc.transfer_checksum = config.transfer_checksum;
  // Decode members take prompts whose KV was computed elsewhere; sharing prefixes there would
  // need the pages published at commit, which the engine does not do yet.
  sc.prefix_cache = config.prefix_cache && config.role != Role::kDecode;
  sc.import_timeout_ms = static_cast<int64_t>(config.transfer_timeout_ms);
  return sc;
}

StatusOr<std::unique_ptr<EngineHost>> EngineHost::Open(const AgentConfig& config) {
  ASSIGN_OR_RETURN(runtime::ServingConfig sc, ServingConfigFor(config));
  std::unique_ptr<EngineHost> host(new EngineHost());
  ASSIGN_OR_RETURN(host->serving_, runtime::ServingEngine::Open(sc));
  host->page_tokens_ = sc.page_tokens;
  host->loop_ = std::make_unique<runtime::EngineLoop>(&host->serving_->engine());
  return host;
}

EngineHost::~EngineHost() { Stop(); }

void EngineHost::Stop() {
  if (loop_) loop_->Stop();
}

int64_t EngineHost::max_context_tokens() const { return serving_->model_config().max_position_embeddings; }

}  // namespace tandem::agent
