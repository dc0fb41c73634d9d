#include "engine/text/detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/base64.h"

namespace tandem::engine::text {
namespace {

// Ranks: the 256 bytes, so every id below 256 is one byte; "<|im_end|>" is 256.
Tokenizer BytesTokenizer() {
  std::string ranks;
  for (int b = 0; b < 256; ++b)
    ranks += Base64Encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  auto t = Tokenizer::FromTiktoken(ranks, Pretokenizer::KimiPattern(), {{"<|im_end|>", 256, true}});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *std::move(t);
}

std::vector<std::string> Stream(Detokenizer& d, std::string_view bytes) {
  std::vector<std::string> out;
  for (unsigned char b : bytes) out.push_back(*d.Add(b));
  out.push_back(d.Flush());
  return out;
}

using Pieces = std::vector<std::string>;

TEST(DetokenizerTest, HoldsBackSplitCharacters) {
  const Tokenizer t = BytesTokenizer();
  Detokenizer d(&t);
  // "é" (2 bytes), "🙂" (4 bytes), "x": text appears only when a character completes.
  EXPECT_EQ(Stream(d, "é🙂x"), (Pieces{"", "é", "", "", "", "🙂", "x", ""}));
}

TEST(DetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer t = BytesTokenizer();
  Detokenizer d(&t);
  // A truncated 3-byte sequence followed by 'A': one U+FFFD for the maximal subpart.
  EXPECT_EQ(Stream(d,
                   "\xE2\x82"
                   "A"),
            (Pieces{"", "",
                    "\xEF\xBF\xBD"
                    "A",
                    ""}));
  // A stray continuation byte at once; an unfinished character at the end on Flush.
  EXPECT_EQ(Stream(d,
                   "\x80"
                   "\xF0\x9F"),
            (Pieces{"\xEF\xBF\xBD", "", "", "\xEF\xBF\xBD"}));
  // Flush reset the state: a new stream starts clean.
  EXPECT_EQ(Stream(d, "ok"), (Pieces{"o", "k", ""}));
}

TEST(DetokenizerTest, SkipsSpecialTokensAndRejectsUnknownIds) {
  const Tokenizer t = BytesTokenizer();
  Detokenizer keep(&t), skip(&t, /*skip_special=*/true);
  EXPECT_EQ(*keep.Add(256), "<|im_end|>");
  EXPECT_EQ(*skip.Add(256), "");
  EXPECT_EQ(keep.Add(257).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(keep.Add(-3).status().code(), StatusCode::kInvalidArgument);
}

TEST(DetokenizerTest, StreamEqualsLossyDecodeOfAllBytes) {
  const Tokenizer t = BytesTokenizer();
  std::mt19937 rng(3);
  const std::string samples[] = {"é", "我",       "🙂",    "\xF0", "\x80", "\xED\xA0\x80",
                                 "a", "\xE2\x82", "\xC0\xAF"};
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    for (int i = 0, n = static_cast<int>(rng() % 12); i < n; ++i) bytes += samples[rng() % 9];
    Detokenizer d(&t);
    std::string joined;
    for (const std::string& piece : Stream(d, bytes)) joined += piece;
    ASSERT_EQ(joined, ToValidUtf8(bytes));
    if (ToValidUtf8(bytes) == bytes) {
      ASSERT_EQ(joined, bytes);
    }
  }
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: 3 bad bytes
  EXPECT_EQ(ToValidUtf8("\xF0\x9F\x99"), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tandem::engine::text
