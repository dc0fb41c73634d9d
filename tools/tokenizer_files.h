#pragma once
// The tokenizer files `tandem make-model` writes beside the checkpoint, in each model family's
// layout (docs/tiny-model.md):
//   Kimi K2 (deepseek_v3): tiktoken.model + tokenizer_config.json, 256 special slots after the ranks;
//   GLM (glm_moe_dsa):     tokenizer.json (byte-level BPE: cl100k Split + ByteLevel, merges) +
//                          tokenizer_config.json, GLM 4.5's added tokens after the vocabulary.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/text/bpe_trainer.h"
#include "engine/text/tokenizer.h"

namespace tandem::tools {

// Kimi K2 reserves its last 256 ids for special tokens (163584..163839).
inline constexpr int32_t kKimiSpecialSlots = 256;

// The special-token contents of Kimi K2's 256 slots, as its tokenizer_config.json lists them
// ([BOS], [EOS], <|im_end|>, ... <|im_middle|>, [UNK], [PAD]); the unnamed slots are
// "<|reserved_token_ID|>" with ID = first_id + slot.
std::vector<std::string> KimiSpecialTokens(int32_t first_id);

// GLM 4.5's added tokens in id order (<|endoftext|>, [MASK], [gMASK], ... </arg_value>).
std::vector<std::string> GlmSpecialTokens();

struct TokenizerFiles {
  std::vector<std::pair<std::string, std::string>> files;  // file name, contents
  std::unique_ptr<engine::text::Tokenizer> tokenizer;      // loaded back from `files`
  std::optional<int32_t> bos_token_id;                     // none for GLM
  std::vector<int32_t> eos_token_ids;                      // config.json's eos_token_id
  std::vector<int32_t> generation_eos_token_ids;           // generation_config.json's
};

// The Kimi files for a vocabulary trained with KimiSpecialTokens(ranks) and Kimi's pattern.
StatusOr<TokenizerFiles> KimiTokenizerFiles(const engine::text::BpeVocabulary& vocab, int64_t max_length);

// The GLM files for a vocabulary trained with GlmSpecialTokens() and the cl100k pattern. The
// thinking and tool-call tags are added tokens but not special (decoding keeps them in the text,
// where the GLM tool-call parser reads them).
StatusOr<TokenizerFiles> GlmTokenizerFiles(const engine::text::BpeVocabulary& vocab, int64_t max_length);

}  // namespace tandem::tools
