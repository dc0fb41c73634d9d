#pragma once
// ServingEngine: the engine's one front door. ServingEngine::Open(ServingConfig) takes one plain
// struct and builds everything a serving engine needs, owning all of it: the model (a checkpoint
// directory with its tokenizer, or a dummy preset), the worker threads, the KV page pool shaped for
// the model (model::KvShapeFor), the forward pass, its executor and the Engine (engine.h). The
// agent and the tools open one per model replica; nothing here is global.
//
// A decode-only engine with an FP8 KV cache and no checkpoint scales fixes its per-layer scales at
// Open by prefilling a fixed calibration sequence (the rule the unified engine applies to its first
// batch: max|x| / 448), because pages arriving from a prefill engine are converted with the scales
// announced in ReserveImport, before any request's KV exists here.
//
// Thread safety: as Engine (one step thread; EngineLoop provides one).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/core/dtype.h"
#include "engine/runtime/engine.h"

namespace tandem::engine {
class ThreadPool;
}
namespace tandem::engine::kv {
class PagePool;
}
namespace tandem::engine::model {
class ModelRunner;
class TensorParallelRunner;
struct ModelConfig;
struct ModelDir;
struct ModelWeights;
}  // namespace tandem::engine::model
namespace tandem::engine::text {
class Tokenizer;
enum class ChatFamily;
}  // namespace tandem::engine::text

namespace tandem::engine::runtime {

struct ServingConfig {
  // The model: a directory as Hugging Face ships one (config.json, safetensors, tokenizer), or a
  // dummy model (model/dummy_model.h: random weights, no tokenizer) of a preset or a config.
  std::string model_dir;
  std::string dummy_preset;
  const model::ModelConfig* dummy_config = nullptr;  // instead of a preset (tests); read during Open only
  // Or weights already in memory (benchmarks and reference tools that build or requantize their
  // own): not owned, must outlive the engine.
  const model::ModelWeights* model_weights = nullptr;
  uint64_t dummy_seed = 1;
  // Weights: a dummy preset is generated in this format (default bf16); a checkpoint must hold it
  // (default: whatever it holds; `tandem quantize` converts checkpoints).
  std::optional<WeightFormat> weights;
  KvCacheDtype kv_dtype = KvCacheDtype::kBf16;
  // The KV page budget in bytes, or (kv_tokens > 0) exactly enough pages for kv_tokens tokens.
  size_t kv_bytes = size_t{1} << 30;
  size_t kv_tokens = 0;
  size_t page_tokens = 16;
  std::vector<float> kv_fp8_layer_scales;  // FP8 only: the checkpoint's per-layer KV scales, or empty
  int threads = 0;                         // forward-pass workers; 0: hardware threads (at most 16)
  // Tensor / expert parallel ranks (model/tensor_parallel.h), CPU ranks as threads sharing the
  // KV pool, each with threads / tensor_parallel workers (at least 1). 1: no sharding.
  int tensor_parallel = 1;
  EngineRole role = EngineRole::kUnified;
  bool integrity = false;     // page tags checked before every step
  bool prefix_cache = false;  // tenant-salted prefix sharing
  // The transfer digest: exports compute it over the bytes they send, imports compare it at
  // commit. Off on both sides of a transfer, or on on both (an importer with it on refuses an
  // exporter's missing digest).
  bool transfer_checksum = true;
  SchedulerConfig scheduler;
  uint64_t seed = 0;                   // sampling seed of requests without one
  int64_t import_timeout_ms = 30'000;  // decode-only: a reservation not committed by then aborts
  const Clock* clock = nullptr;        // nullptr: SteadyClock::Default()
};

// The pages `tokens` tokens take (at least one): the one place a token count becomes a page count.
size_t KvPagesForTokens(size_t tokens, size_t page_tokens);

class ServingEngine {
 public:
  // Errors name what is wrong: InvalidArgument for a config (no model, both a directory and a
  // preset, a weight format the checkpoint does not hold, a budget under one page, bad scheduler
  // knobs); the loaders' errors (NotFound, DataLoss, InvalidArgument) for the model; and
  // ResourceExhausted when the KV memory cannot be had.
  static StatusOr<std::unique_ptr<ServingEngine>> Open(const ServingConfig& config);
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  Engine& engine() { return *engine_; }
  const ServingConfig& config() const { return config_; }
  const model::ModelConfig& model_config() const;
  // The model directory's tokenizer, chat family and end-of-sequence ids; a dummy preset has no
  // tokenizer (nullptr) and no eos ids.
  const text::Tokenizer* tokenizer() const;
  text::ChatFamily chat_family() const;
  const std::vector<int32_t>& eos_token_ids() const { return eos_; }

  // The layers below the Engine, for benchmarks and tools that drive the forward pass directly
  // (model_bench, model_logits); serving code goes through engine().
  model::ModelRunner& runner() { return *runner_; }
  kv::PagePool& kv_pool() { return *pool_; }
  ThreadPool& workers() { return *workers_; }
  const model::ModelWeights& weights() const { return *weights_; }
  int threads() const { return threads_; }

 private:
  ServingEngine() = default;
  Status CalibrateFp8Scales();

  ServingConfig config_;
  std::unique_ptr<model::ModelDir> dir_;          // a model directory, or
  std::unique_ptr<model::ModelWeights> dummy_;    // a dummy preset's weights
  const model::ModelWeights* weights_ = nullptr;  // whichever of the two
  std::vector<int32_t> eos_;
  int threads_ = 0;
  std::unique_ptr<ThreadPool> workers_;
  std::unique_ptr<kv::PagePool> pool_;
  std::unique_ptr<model::ModelRunner> runner_;
  std::unique_ptr<model::TensorParallelRunner> tp_runner_;  // tensor_parallel > 1
  std::unique_ptr<ModelExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace tandem::engine::runtime
