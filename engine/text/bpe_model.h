#pragma once
// Byte-pair encoding of one pre-tokenized piece, over bytes.
//
// Two ways to decide which adjacent pair merges next, always the lowest-ranked pair, leftmost on
// ties:
//   merge list (Hugging Face `tokenizer.json`): pair (a, b) ranks by its position in `merges`;
//   ranks (tiktoken): pair (a, b) ranks as the token spelled a+b, if the vocabulary has it.
// Long pieces merge through a priority queue (O(n log n)); an encoder is immutable after
// construction and safe to share between threads.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem::engine::text {

class BpeModel {
 public:
  // `token_bytes[id]` is the byte string of token `id` (empty for ids the model does not own, such
  // as added tokens). REQUIRES of the data (checked, DataLoss otherwise): every single byte is a
  // token, no byte string is two tokens, each merge (a, b) names tokens and a+b is a token.
  // `whole_piece_first`: a piece that is itself a token encodes as that token (HF
  // `ignore_merges`; always so in tiktoken).
  static StatusOr<BpeModel> FromMerges(std::vector<std::string> token_bytes,
                                       const std::vector<std::pair<int32_t, int32_t>>& merges,
                                       bool whole_piece_first);
  static StatusOr<BpeModel> FromRanks(std::vector<std::string> token_bytes);

  // Appends the token ids of `piece` (non-empty) to `out`.
  void Encode(std::string_view piece, std::vector<int32_t>* out) const;

  const std::vector<std::string>& token_bytes() const { return token_bytes_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  BpeModel() = default;
  Status Index();
  // The merge of the adjacent tokens `left` (spelled by `left_bytes`) and `right`; rank < 0: none.
  Merge PairMerge(int32_t left, int32_t right, std::string_view both_bytes) const;

  bool use_ranks_ = false;
  bool whole_piece_first_ = true;
  std::vector<std::string> token_bytes_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> bytes_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  int32_t byte_id_[256] = {};
};

}  // namespace tandem::engine::text
