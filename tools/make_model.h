#pragma once
// `tandem make-model`: a deterministic random model directory with a real BPE vocabulary, laid out
// like a Kimi K2 checkpoint (deepseek_v3 presets) or a GLM one (glm_moe_dsa presets) so that it
// loads through the same code (docs/tiny-model.md):
//   tokenizer files         tools/tokenizer_files.h, from engine::text::TrainBpe over TinyCorpus()
//                           (Kimi: tiktoken.model, 256 special slots; GLM: tokenizer.json)
//   config.json             the preset with vocab_size = the tokenizer's, bos/eos token ids
//   generation_config.json  bos id; eos ids (Kimi: [EOS], <|im_end|>; GLM: as config.json)
//   model*.safetensors      engine::model::WriteDummyCheckpoint(config, weights, seed)
// Same options, same bytes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"
#include "tools/tokenizer_files.h"

namespace tandem::tools {

struct MakeModelOptions {
  std::string out_dir;
  std::string preset = "tiny";  // a preset of engine/model/presets.h, at most 4 GiB in bf16
  engine::WeightFormat weights = engine::WeightFormat::kBf16;
  uint64_t seed = 0;
  int64_t vocab_size = 4096;  // total: ranks + special tokens
  std::string corpus_path;    // train the vocabulary on this file instead of TinyCorpus()
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

// The text the vocabulary is trained on: engine/text/data/tiny_corpus.txt, compiled in.
std::string_view TinyCorpus();

// Writes the model directory (created if missing; files are replaced). InvalidArgument for an
// unknown preset, one over 4 GiB, or a vocab_size outside [1024, 65536]; errors of the trainer
// (FailedPrecondition: more tokens than the corpus supports) or the writer otherwise.
StatusOr<MakeModelReport> MakeModel(const MakeModelOptions& options);

}  // namespace tandem::tools
