#pragma once
// A model directory as Hugging Face ships one, loaded whole: config.json + safetensors weights
// (loader.h) + the tokenizer + which chat template renders its prompts (docs/tiny-model.md).
//
// Tokenizer files, first found wins:
//   tiktoken.model (+ tokenizer_config.json's added_tokens_decoder)  Kimi K2.x; pattern: Kimi's
//   tokenizer.json                                                    GLM (Hugging Face BPE)
// Chat family: glm_moe_dsa -> GLM, deepseek_v3 / kimi_k2 / kimi_k25 -> Kimi K2.
// Token ids: config.json's bos_token_id / eos_token_id (top level or text_config), the
// eos_token_id of generation_config.json, and the bos_token / eos_token names of
// tokenizer_config.json (a string or {"content": ...}); all are checked against each other.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model/loader.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/text/chat_types.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::model {

// The text side of a model directory.
struct ModelTokens {
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::string tokenizer_path;  // the file it was read from
  text::ChatFamily chat_family = text::ChatFamily::kKimiK2;
  std::optional<int32_t> bos_token_id;
  // Every id that ends a generation, sorted: the config's and generation config's eos ids, the
  // tokenizer config's eos_token, and the chat family's end-of-turn tokens that the tokenizer has
  // (Kimi: <|im_end|>; GLM: <|user|>, <|observation|>, <|endoftext|>).
  std::vector<int32_t> eos_token_ids;
};

// Reads the tokenizer of `dir` and checks it against `config`. Errors (each naming the file):
// NotFound when dir has neither tiktoken.model nor tokenizer.json; the tokenizer loader's errors
// (DataLoss for a malformed file); InvalidArgument when the tokenizer has ids at or above
// config.vocab_size, lacks a special token the chat template writes, a bos/eos id is outside the
// tokenizer's vocabulary, or config.json and tokenizer_config.json disagree on bos or eos.
StatusOr<ModelTokens> LoadModelTokens(const std::string& dir, const ModelConfig& config);

struct ModelDir {
  std::string path;
  ModelWeights weights;  // weights.config is the parsed config.json
  ModelTokens tokens;
};

// LoadModelConfig, LoadModelTokens (checked before any weight is read), then LoadModel.
// Returned by pointer: a ModelRunner keeps a reference to `weights`, which must not move.
StatusOr<std::unique_ptr<ModelDir>> LoadModelDir(const std::string& dir, const LoadOptions& options = {});

}  // namespace tandem::engine::model
