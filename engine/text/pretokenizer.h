#pragma once
// Regex pre-tokenization: splits text into the pieces that BPE encodes independently.
//
// std::regex has no \p{L}, so instead of a regex engine this recognizes the pattern families that
// byte-level BPE models use, by their exact source text, and runs a hand-written matcher that
// gives the same leftmost-first matches a backtracking engine would (docs/tokenizers.md):
//   kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kCl100k  (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
//            \s+(?!\S)|\s+   (GLM-4.x, GPT-4; Qwen2's variant has \p{N} instead of \p{N}{1,3})
//   kKimi    [\p{Han}]+|<cased-word rules of o200k minus Han>|\p{N}{1,3}|... (Kimi K2's tiktoken)

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::engine::text {

enum class PatternFamily { kGpt2, kCl100k, kKimi };

class Pretokenizer {
 public:
  // The pattern of GPT-2's ByteLevel pre-tokenizer (`use_regex: true`).
  static Pretokenizer Gpt2();
  // Recognizes `pattern` (a regex's source text). Unimplemented, quoting the pattern, for any
  // pattern outside the supported families.
  static StatusOr<Pretokenizer> FromPattern(std::string_view pattern);

  // Appends the pieces of `text` (which cover it exactly, in order) to `pieces`. Invalid UTF-8
  // bytes are treated as one-byte characters that are neither letters, numbers nor spaces.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  PatternFamily family() const { return family_; }
  // The source text of Kimi K2's pattern, and of cl100k's (GLM's) pattern.
  static const std::string& KimiPattern();
  static const std::string& Cl100kPattern();

 private:
  Pretokenizer(PatternFamily family, int max_digits) : family_(family), max_digits_(max_digits) {}
  size_t MatchGpt2(std::string_view text, size_t pos) const;
  size_t MatchCl100k(std::string_view text, size_t pos) const;
  size_t MatchKimi(std::string_view text, size_t pos) const;

  PatternFamily family_;
  int max_digits_;  // the n of \p{N}{1,n}; 0 means unbounded (\p{N}+)
};

}  // namespace tandem::engine::text
