#include "engine/text/pretokenizer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine::text {
namespace {

std::vector<std::string> Split(const Pretokenizer& p, std::string_view text) {
  std::vector<std::string_view> pieces;
  p.Split(text, &pieces);
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

TEST(PretokenizerTest, Cl100kWordsSpacesAndContractions) {
  auto p = Pretokenizer::FromPattern(Pretokenizer::Cl100kPattern());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Split(*p, "Hello world's  end"), (Pieces{"Hello", " world", "'s", " ", " end"}));
  // Case-insensitive contractions, including U+017F (long s), which folds to 's'.
  EXPECT_EQ(Split(*p, "IT'S we'LL x'ſ"), (Pieces{"IT", "'S", " we", "'LL", " x", "'ſ"}));
  // Digits in runs of at most three; punctuation with a leading space; newline tails.
  EXPECT_EQ(Split(*p, "1234567 !!?\n\nx"), (Pieces{"123", "456", "7", " !!?\n\n", "x"}));
  // \s*[\r\n]+ takes the whitespace up to the last newline; \s+(?!\S) leaves one space to the word.
  EXPECT_EQ(Split(*p, "a \n  b"), (Pieces{"a", " \n", " ", " b"}));
  EXPECT_EQ(Split(*p, "a   "), (Pieces{"a", "   "}));
  // A non-letter prefix joins a word; a combining mark is not a letter.
  EXPECT_EQ(Split(*p, "\tword \"quoted\" e\xCC\x81t"),
            (Pieces{"\tword", " \"", "quoted", "\"", " e", "\xCC\x81t"}));
}

TEST(PretokenizerTest, Cl100kScriptsAndInvalidBytes) {
  auto p = Pretokenizer::FromPattern(Pretokenizer::Cl100kPattern());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Split(*p, "我能吞下玻璃。ภาษาไทย"), (Pieces{"我能吞下玻璃", "。ภาษาไทย"}));
  EXPECT_EQ(Split(*p,
                  "ab\xFF\xFE"
                  "cd"),
            (Pieces{"ab", "\xFF\xFE", "cd"}));
  // A truncated character at the end is one invalid byte at a time, never read past the end.
  EXPECT_EQ(Split(*p, "x\xE6\x88"), (Pieces{"x", "\xE6\x88"}));
}

TEST(PretokenizerTest, Qwen2PatternSplitsSingleDigits) {
  std::string qwen = Pretokenizer::Cl100kPattern();
  qwen.replace(qwen.find(R"(\p{N}{1,3})"), 10, R"(\p{N})");
  auto p = Pretokenizer::FromPattern(qwen);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Split(*p, "x 2024"), (Pieces{"x", " ", "2", "0", "2", "4"}));
}

TEST(PretokenizerTest, Gpt2Pattern) {
  const Pretokenizer p = Pretokenizer::Gpt2();
  EXPECT_EQ(Split(p, "Hello world's 2024!!  x"), (Pieces{"Hello", " world", "'s", " 2024", "!!", " ", " x"}));
  // GPT-2's contractions are case-sensitive.
  EXPECT_EQ(Split(p, "IT'S"), (Pieces{"IT", "'", "S"}));
}

TEST(PretokenizerTest, KimiHanAndCasedWords) {
  auto p = Pretokenizer::FromPattern(Pretokenizer::KimiPattern());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->family(), PatternFamily::kKimi);
  // Han runs stand alone; kana (Lo) counts as "upper" and "lower"; a cased word ends where lower
  // case turns upper; contractions attach.
  EXPECT_EQ(Split(*p, "東京はHelloWORLDs they'RE"), (Pieces{"東京", "はHello", "WORLDs", " they'RE"}));
  EXPECT_EQ(Split(*p, "camelCaseX"), (Pieces{"camel", "Case", "X"}));
  EXPECT_EQ(Split(*p, "ABC"), (Pieces{"ABC"}));
  EXPECT_EQ(Split(*p, "12345"), (Pieces{"123", "45"}));
}

TEST(PretokenizerTest, UnsupportedPatternIsNamed) {
  auto p = Pretokenizer::FromPattern(R"(\w+|\s+)");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find(R"('\w+|\s+')"), std::string::npos) << p.status().message();
}

TEST(PretokenizerTest, PiecesCoverArbitraryBytes) {
  auto p = Pretokenizer::FromPattern(Pretokenizer::KimiPattern());
  ASSERT_TRUE(p.ok());
  uint32_t state = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = round % 40;
    for (int i = 0; i < n; ++i) {
      state = state * 1103515245 + 12345;
      text.push_back(static_cast<char>(state >> 16));
    }
    std::string joined;
    for (const std::string& piece : Split(*p, text)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    ASSERT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace tandem::engine::text
