#pragma once
// The small tiktoken-style tokenizer the text fuzzers stream through: the 256 bytes plus a few
// merges ("th" "he" "the" " the" "in" "ing" "我能", so BPE does work and tokens span several
// bytes) and one special token, <|im_end|> = 300. Aborts if it cannot be built (a fuzzer bug).

#include <cstdlib>
#include <string>

#include "common/base64.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::text {

inline const Tokenizer& FixedFuzzTokenizer() {
  static const Tokenizer* tokenizer = [] {
    std::string ranks;
    for (int b = 0; b < 256; ++b) {
      ranks += Base64Encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
    }
    ranks += "dGg= 256\naGU= 257\ndGhl 258\nIHRoZQ== 259\naW4= 260\naW5n 261\n5oiR6IO9 262\n";
    auto loaded = Tokenizer::FromTiktoken(ranks, Pretokenizer::KimiPattern(), {{"<|im_end|>", 300, true}});
    if (!loaded.ok()) std::abort();
    return new Tokenizer(*std::move(loaded));
  }();
  return *tokenizer;
}

}  // namespace tandem::engine::text
