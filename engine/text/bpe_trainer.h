#pragma once
// A byte-level BPE trainer: learns a tiktoken-style rank vocabulary from a text corpus
// (docs/tiny-model.md). `tandem make-model` uses it to give the tiny model a real vocabulary.
//
// The corpus is cut around the special tokens (they are never learned), split into pieces by the
// pre-tokenization pattern, and each distinct piece is counted. Every piece starts as its bytes;
// then, until the vocabulary is full, the adjacent pair with the highest count over the corpus
// is merged everywhere (left to right, non-overlapping). Ties go to the lowest (left rank, right
// rank). Pair counts are updated incrementally from the pieces that contain the merged pair, so
// a merge costs time in proportion to those pieces, not to the corpus.
//
// Ranks: the 256 single bytes first (rank = byte value), then each merged token in merge order.
// A merge whose bytes are already a token (reached by another split) reuses that token.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::text {

struct BpeTrainerOptions {
  // The pre-tokenization pattern (a family Pretokenizer::FromPattern recognizes).
  std::string pattern = Pretokenizer::KimiPattern();
  // Ordinary tokens (ranks) plus special tokens. REQUIRES: >= 256 + special_tokens.size().
  int64_t vocab_size = 4096;
  // Added after the ranks, ids ranks.size(), ranks.size() + 1, ... in this order. Must be
  // non-empty and distinct.
  std::vector<std::string> special_tokens;
  // Pairs seen fewer times than this are never merged (2: a pair seen once teaches nothing).
  int64_t min_pair_count = 2;
};

struct BpeVocabulary {
  std::vector<std::string> ranks;                   // [rank] the token's bytes
  std::vector<std::pair<int32_t, int32_t>> merges;  // (left rank, right rank) in merge order
  std::vector<AddedToken> special_tokens;           // ids after the ranks
  int64_t corpus_pieces = 0;                        // pre-tokenized pieces in the corpus
  int64_t distinct_pieces = 0;

  int64_t total_size() const { return static_cast<int64_t>(ranks.size() + special_tokens.size()); }
};

// Learns a vocabulary of exactly options.vocab_size tokens from `corpus`. Deterministic: the same
// corpus and options give the same vocabulary. Errors: InvalidArgument for bad options (size too
// small, an empty or repeated special token, an unsupported pattern); FailedPrecondition when the
// corpus runs out of pairs seen min_pair_count times before the vocabulary is full (the message
// says how many tokens it supports).
StatusOr<BpeVocabulary> TrainBpe(std::string_view corpus, const BpeTrainerOptions& options);

// The ranks as a tiktoken rank file: one "<base64 bytes> <rank>\n" line per rank, in rank order
// (what Kimi's tiktoken.model holds and Tokenizer::FromTiktoken reads).
std::string TiktokenRankFile(const BpeVocabulary& vocabulary);

// The trained vocabulary as a Tokenizer (FromTiktoken over TiktokenRankFile with the same pattern
// and the special tokens).
StatusOr<Tokenizer> TokenizerFromVocabulary(const BpeVocabulary& vocabulary, std::string_view pattern);

}  // namespace tandem::engine::text
