#pragma once
// `tandem make-model`: a deterministic random model directory with a real BPE vocabulary, laid out
// like a Kimi K2 checkpoint so that it loads through the same code (docs/tiny-model.md):
//   tiktoken.model          ranks learned by engine::text::TrainBpe from TinyCorpus()
//   tokenizer_config.json   Kimi's 256 special-token slots (added_tokens_decoder), bos/eos names
//   config.json             the preset with vocab_size = ranks + 256 and bos/eos token ids
//   generation_config.json  bos id; eos ids [EOS] and <|im_end|>
//   model*.safetensors      engine::model::WriteDummyCheckpoint(config, weights, seed)
// Same options, same bytes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::tools {

struct MakeModelOptions {
  std::string out_dir;
  std::string preset = "tiny";  // a deepseek_v3 preset of engine/model/presets.h, at most 4 GB
  engine::WeightFormat weights = engine::WeightFormat::kBf16;
  uint64_t seed = 0;
  int64_t vocab_size = 4096;  // total: ranks + kKimiSpecialSlots
  int threads = 0;            // 0: hardware threads
};

struct MakeModelReport {
  int64_t vocab_size = 0;
  int64_t ranks = 0;
  int64_t merges = 0;
  int64_t corpus_bytes = 0;
  int64_t corpus_tokens = 0;  // the corpus encoded with the new tokenizer
  double train_seconds = 0;
  double write_seconds = 0;
  int64_t checkpoint_bytes = 0;  // safetensors files
};

// Kimi K2 reserves its last 256 ids for special tokens (163584..163839).
inline constexpr int32_t kKimiSpecialSlots = 256;

// The text the vocabulary is trained on: engine/text/data/tiny_corpus.txt, compiled in.
std::string_view TinyCorpus();

// The special-token contents of Kimi K2's 256 slots, as its tokenizer_config.json lists them
// ([BOS], [EOS], <|im_end|>, ... <|im_middle|>, [UNK], [PAD]); the unnamed slots are
// "<|reserved_token_ID|>" with ID = first_id + slot.
std::vector<std::string> KimiSpecialTokens(int32_t first_id);

// Writes the model directory (created if missing; files are replaced). InvalidArgument for an
// unknown or non-deepseek_v3 preset, one over 4 GB, or a vocab_size outside [1024, 65536];
// errors of the trainer or the writer otherwise.
StatusOr<MakeModelReport> MakeModel(const MakeModelOptions& options);

}  // namespace tandem::tools
