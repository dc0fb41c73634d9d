#pragma once
// A byte-level BPE tokenizer: added (special) tokens, regex pre-tokenization, BPE over bytes.
//
// Loads Hugging Face `tokenizer.json` files of byte-level BPE models (GLM) and tiktoken rank files
// (Kimi's `tiktoken.model`) with their pattern and special tokens. Encoding never fails: any byte
// string, valid UTF-8 or not, encodes, and DecodeBytes(Encode(s)) == s. Immutable once loaded;
// safe to share between threads. Formats and patterns: docs/tokenizers.md.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/text/bpe_model.h"
#include "engine/text/pretokenizer.h"

namespace tandem::engine::text {

// A token matched in the text before pre-tokenization and never split ("<|im_end|>").
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = true;  // special tokens are dropped by decoding with skip_special
};

// Ids must be below (number of tokens listed) + kMaxIdGap: a file cannot make the loader allocate
// a table far larger than itself. Real vocabularies are dense (Kimi K2: 163 840 ids, all listed).
inline constexpr int64_t kMaxIdGap = 1 << 16;

class Tokenizer {
 public:
  // Parses a Hugging Face tokenizer.json (its text). DataLoss for malformed files, Unimplemented
  // naming the feature for valid files this loader does not support (a normalizer, a pattern
  // outside Pretokenizer's families, BPE dropout, ...).
  static StatusOr<Tokenizer> FromHfJson(std::string_view json_text);
  // A tiktoken rank file (lines "<base64 token> <rank>"), its pre-tokenization pattern (see
  // Pretokenizer::FromPattern) and its special tokens, whose ids must not be ranks.
  static StatusOr<Tokenizer> FromTiktoken(std::string_view rank_file_text, std::string_view pattern,
                                          std::vector<AddedToken> special_tokens);
  // Reads `path`: a file named *.json is a tokenizer.json; anything else is a tiktoken rank file
  // with Kimi K2's pattern and the added tokens listed in `added_tokens_decoder` of the
  // tokenizer_config.json beside it (when there is one).
  static StatusOr<Tokenizer> LoadFile(const std::string& path);

  // The token ids of `text`. With `parse_special`, added tokens in the text become their ids;
  // without, their text is encoded like any other (for untrusted message content).
  std::vector<int32_t> Encode(std::string_view text, bool parse_special = true) const;

  // The bytes of `ids` concatenated (not necessarily valid UTF-8 for an arbitrary id sequence).
  // InvalidArgument for an id outside the vocabulary.
  StatusOr<std::string> DecodeBytes(std::span<const int32_t> ids, bool skip_special = false) const;
  // The bytes of one token, or nullopt for an id outside the vocabulary.
  std::optional<std::string_view> TokenBytes(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // The id of an added token, by its text.
  std::optional<int32_t> AddedTokenId(std::string_view content) const;

  // One more than the largest id.
  int32_t vocab_size() const { return static_cast<int32_t>(id_bytes_.size()); }
  PatternFamily pattern_family() const { return pretokenizer_.family(); }

 private:
  Tokenizer(Pretokenizer pretokenizer, BpeModel bpe) : pretokenizer_(pretokenizer), bpe_(std::move(bpe)) {}
  // Registers the added tokens and builds the id table. DataLoss on conflicting ids.
  Status Finish(std::vector<AddedToken> added);
  // The longest added token at text[pos], or nullptr.
  const AddedToken* MatchAdded(std::string_view text, size_t pos) const;
  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const;

  Pretokenizer pretokenizer_;
  BpeModel bpe_;
  std::vector<AddedToken> added_;                          // sorted by content length, longest first
  std::vector<std::vector<int32_t>> added_by_first_byte_;  // [256] indexes into added_
  std::vector<std::string> id_bytes_;                      // [vocab_size]
  std::vector<uint8_t> id_kind_;  // [vocab_size] 0: none, 1: BPE, 2: added, 3: special
};

}  // namespace tandem::engine::text
