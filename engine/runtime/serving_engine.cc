#include "engine/runtime/serving_engine.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "common/hash.h"
#include "engine/core/thread_pool.h"
#include "engine/kv/page_pool.h"
#include "engine/model/dummy_model.h"
#include "engine/model/forward.h"
#include "engine/model/kv_shape.h"
#include "engine/model/model_dir.h"
#include "engine/model/presets.h"
#include "engine/model/tensor_parallel.h"
#include "engine/runtime/model_runner_executor.h"

namespace tandem::engine::runtime {
namespace {

constexpr int64_t kCalibrationTokens = 64;

WeightFormat CheckpointFormat(const model::QuantizationConfig& q) {
  switch (q.method) {
    case model::QuantizationConfig::Method::kFp8Block128: return WeightFormat::kFp8Block128;
    case model::QuantizationConfig::Method::kCompressedInt4: return WeightFormat::kInt4Group32;
    case model::QuantizationConfig::Method::kNone: break;
  }
  return WeightFormat::kBf16;
}

}  // namespace

size_t KvPagesForTokens(size_t tokens, size_t page_tokens) {
  return std::max<size_t>(1, (tokens + page_tokens - 1) / page_tokens);
}

ServingEngine::~ServingEngine() {
  engine_.reset();  // before the executor, runner and pool it uses
}

StatusOr<std::unique_ptr<ServingEngine>> ServingEngine::Open(const ServingConfig& config) {
  if (!config.model_dir.empty() + !config.dummy_preset.empty() + (config.dummy_config != nullptr) +
          (config.model_weights != nullptr) !=
      1) {
    return Status::InvalidArgument(
        "ServingConfig needs exactly one of model_dir, dummy_preset, dummy_config and model_weights");
  }
  if (config.page_tokens == 0) return Status::InvalidArgument("ServingConfig.page_tokens must be > 0");
  if (config.threads < 0) return Status::InvalidArgument("ServingConfig.threads must be >= 0");
  if (config.import_timeout_ms <= 0)
    return Status::InvalidArgument("ServingConfig.import_timeout_ms must be > 0");
  RETURN_IF_ERROR(ValidateSchedulerConfig(config.scheduler));
  std::unique_ptr<ServingEngine> s(new ServingEngine());
  s->config_ = config;
  s->threads_ = config.threads > 0
                    ? config.threads
                    : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  if (!config.model_dir.empty()) {
    model::LoadOptions load;
    load.threads = s->threads_;
    ASSIGN_OR_RETURN(s->dir_, model::LoadModelDir(config.model_dir, load));
    const WeightFormat stored = CheckpointFormat(s->dir_->weights.config.quantization);
    if (config.weights && *config.weights != stored) {
      return Status::InvalidArgument(
          "the checkpoint in " + config.model_dir + " holds " + std::string(WeightFormatName(stored)) +
          " weights, the config asks for " + std::string(WeightFormatName(*config.weights)) +
          " (convert it with `tandem quantize`)");
    }
    s->weights_ = &s->dir_->weights;
    s->eos_ = s->dir_->tokens.eos_token_ids;
  } else if (config.model_weights != nullptr) {
    s->weights_ = config.model_weights;
  } else {
    model::ModelConfig preset;
    if (config.dummy_config != nullptr) {
      preset = *config.dummy_config;
      s->config_.dummy_config = nullptr;  // not kept: the caller's may go away
    } else {
      ASSIGN_OR_RETURN(preset, model::Preset(config.dummy_preset));
    }
    ASSIGN_OR_RETURN(model::ModelWeights w,
                     model::MakeDummyModel(preset, config.weights.value_or(WeightFormat::kBf16),
                                           config.dummy_seed, s->threads_));
    s->dummy_ = std::make_unique<model::ModelWeights>(std::move(w));
    s->weights_ = s->dummy_.get();
  }

  kv::PagePoolConfig pc;
  pc.shape = model::KvShapeFor(s->weights_->config);
  pc.dtype = config.kv_dtype;
  pc.page_tokens = config.page_tokens;
  pc.fp8_layer_scales = config.kv_fp8_layer_scales;
  pc.budget_bytes = config.kv_bytes;
  if (config.kv_tokens > 0) {
    ASSIGN_OR_RETURN(const size_t page_bytes, kv::ComputePageBytes(pc));
    pc.budget_bytes = KvPagesForTokens(config.kv_tokens, config.page_tokens) * page_bytes;
  }
  ASSIGN_OR_RETURN(s->pool_, kv::PagePool::Create(pc));
  s->workers_ = std::make_unique<ThreadPool>(s->threads_);
  ASSIGN_OR_RETURN(s->runner_, model::ModelRunner::Create(*s->weights_, s->workers_.get(), s->pool_.get()));
  if (config.tensor_parallel > 1) {
    ASSIGN_OR_RETURN(s->tp_runner_, model::TensorParallelRunner::Create(
                                        *s->weights_, config.tensor_parallel,
                                        std::max(1, s->threads_ / config.tensor_parallel), s->pool_.get()));
    s->executor_ = std::make_unique<TensorParallelExecutor>(s->tp_runner_.get(), s->pool_.get());
  } else if (config.tensor_parallel < 1) {
    return Status::InvalidArgument("tensor_parallel " + std::to_string(config.tensor_parallel) +
                                   " must be >= 1");
  } else {
    s->executor_ = std::make_unique<ModelRunnerExecutor>(s->runner_.get(), s->pool_.get());
  }
  if (config.role == EngineRole::kDecodeOnly && config.kv_dtype == KvCacheDtype::kFp8E4M3) {
    RETURN_IF_ERROR(s->CalibrateFp8Scales());
  }

  EngineConfig ec;
  ec.executor = s->executor_.get();
  ec.scheduler = config.scheduler;
  ec.integrity = config.integrity;
  ec.prefix_cache = config.prefix_cache;
  ec.transfer_checksum = config.transfer_checksum;
  ec.role = config.role;
  ec.tokenizer = s->tokenizer();
  ec.eos_token_ids = s->eos_;
  ec.seed = config.seed;
  ec.clock = config.clock;
  ec.import_timeout_ms = config.import_timeout_ms;
  ASSIGN_OR_RETURN(s->engine_, Engine::Create(ec));
  return s;
}

Status ServingEngine::CalibrateFp8Scales() {
  bool fixed = true;
  for (size_t l = 0; l < pool_->config().shape.num_layers; ++l) fixed = fixed && pool_->layer_scale_fixed(l);
  if (fixed) return Status::Ok();
  const int64_t tokens =
      std::min<int64_t>(kCalibrationTokens, static_cast<int64_t>(pool_->num_pages() * pool_->page_tokens()));
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  const uint64_t vocab = static_cast<uint64_t>(weights_->config.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(SplitMix64At(0x7a11, i) % vocab);
  model::KvSequence seq;
  const size_t pages = KvPagesForTokens(ids.size(), pool_->page_tokens());
  for (size_t p = 0; p < pages; ++p) seq.pages.push_back(static_cast<kv::PageId>(p));
  const model::StepInput in{&seq, ids};
  std::vector<float> logits;
  model::ForwardOptions options;
  options.all_logits = false;
  RETURN_IF_ERROR(runner_->Forward(std::span<const model::StepInput>(&in, 1), options, &logits));
  // The calibration rows are don't-care: every page is written before it is read again.
  return Status::Ok();
}

const model::ModelConfig& ServingEngine::model_config() const { return weights_->config; }

const text::Tokenizer* ServingEngine::tokenizer() const {
  return dir_ != nullptr ? dir_->tokens.tokenizer.get() : nullptr;
}

text::ChatFamily ServingEngine::chat_family() const {
  if (dir_ != nullptr) return dir_->tokens.chat_family;
  return weights_->config.has_indexer() ? text::ChatFamily::kGlm : text::ChatFamily::kKimiK2;
}

}  // namespace tandem::engine::runtime
