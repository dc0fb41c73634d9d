#include "engine/text/tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "engine/text/byte_level.h"

namespace tandem::engine::text {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// A byte-level tokenizer.json: ids 0..255 the bytes, then "ab" 256, "abc" 257, "Ġab" 258, "Ġ" is 32's
// spelling; merges in string form; "<|end|>" 300 and "<a>"/"<a>b" as added tokens.
json SmallTokenizerJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["Ġab"] = 258;
  json added = json::array();
  added.push_back({{"id", 300}, {"content", "<|end|>"}, {"special", true}});
  added.push_back({{"id", 301}, {"content", "<a>"}, {"special", false}});
  added.push_back({{"id", 302}, {"content", "<a>b"}, {"special", false}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             json::array({{{"type", "Split"},
                           {"pattern", {{"Regex", Pretokenizer::Cl100kPattern()}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "ab c", "Ġ ab"})}}}};
}

Tokenizer Small(const json& j = SmallTokenizerJson()) {
  auto t = Tokenizer::FromHfJson(j.dump());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *std::move(t);
}

TEST(TokenizerTest, MergesByRank) {
  const Tokenizer t = Small();
  EXPECT_EQ(t.Encode("abc"), (Ids{257}));
  EXPECT_EQ(t.Encode("cab"), (Ids{'c', 256}));
  // " abc": "ab c" (rank 1) merges before "Ġ ab" (rank 2), and "Ġ abc" is no merge.
  EXPECT_EQ(t.Encode("ab ab abc"), (Ids{256, 258, ' ', 257}));
  EXPECT_EQ(t.Encode(""), (Ids{}));
  // A piece longer than the short-piece limit merges through the priority queue, with the same result.
  std::string longer;
  Ids expected;
  for (int i = 0; i < 40; ++i) {
    longer += "abc";
    expected.push_back(257);
  }
  EXPECT_EQ(t.Encode(longer), expected);
  EXPECT_EQ(t.Encode("abcabc"), (Ids{257, 257}));
}

TEST(TokenizerTest, ArrayMergesEqualStringMerges) {
  json j = SmallTokenizerJson();
  j["model"]["merges"] =
      json::array({json::array({"a", "b"}), json::array({"ab", "c"}), json::array({"Ġ", "ab"})});
  EXPECT_EQ(Small(j).Encode("ab ab abc cab"), Small().Encode("ab ab abc cab"));
}

TEST(TokenizerTest, IgnoreMergesAndGpt2ByteLevelPattern) {
  json j = SmallTokenizerJson();
  j["model"]["vocab"]["ca"] = 259;  // no merge makes "ca"
  EXPECT_EQ(Small(j).Encode("ca"), (Ids{'c', 'a'}));
  j["model"]["ignore_merges"] = true;  // a piece that is a token is that token
  EXPECT_EQ(Small(j).Encode("ca"), (Ids{259}));
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const Tokenizer gpt2 = Small(j);
  EXPECT_EQ(gpt2.pattern_family(), PatternFamily::kGpt2);
  EXPECT_EQ(gpt2.Encode("ab'S"), (Ids{256, '\'', 'S'}));  // case-sensitive contractions
}

TEST(TokenizerTest, AddedTokensMatchFirstLongestAndNeverSplit) {
  const Tokenizer t = Small();
  EXPECT_EQ(t.Encode("x<|end|>ab"), (Ids{'x', 300, 256}));
  EXPECT_EQ(t.Encode("<a>b<a>c"), (Ids{302, 301, 'c'}));
  const Ids plain = t.Encode("<|end|>", /*parse_special=*/false);
  EXPECT_EQ(plain.size(), 7u);  // pieces "<|", "end", "|>"; no merges apply
  EXPECT_EQ(*t.DecodeBytes(plain), "<|end|>");
  EXPECT_TRUE(t.IsSpecial(300));
  EXPECT_FALSE(t.IsSpecial(301));
  EXPECT_EQ(t.AddedTokenId("<|end|>"), 300);
  EXPECT_EQ(*t.DecodeBytes(Ids{'x', 300, 256}, /*skip_special=*/true), "xab");
}

TEST(TokenizerTest, DecodeRejectsUnknownIds) {
  const Tokenizer t = Small();
  EXPECT_EQ(t.DecodeBytes(Ids{299}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.DecodeBytes(Ids{-1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.DecodeBytes(Ids{303}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(t.TokenBytes(1 << 30).has_value());
}

// Each mutation of a valid tokenizer.json must give this error code, with this text in the message.
struct BadJsonCase {
  const char* name;
  void (*mutate)(json&);
  StatusCode code;
  const char* message;
};

TEST(TokenizerTest, MalformedTokenizerJsonIsAnError) {
  const BadJsonCase cases[] = {
      {"no model", [](json& j) { j.erase("model"); }, StatusCode::kDataLoss, "no model"},
      {"vocab array", [](json& j) { j["model"]["vocab"] = json::array(); }, StatusCode::kDataLoss, "vocab"},
      {"negative id", [](json& j) { j["model"]["vocab"]["ab"] = -4; }, StatusCode::kDataLoss, "'ab'"},
      {"string id", [](json& j) { j["model"]["vocab"]["ab"] = "x"; }, StatusCode::kDataLoss, "'ab'"},
      {"sparse id", [](json& j) { j["model"]["vocab"]["ab"] = 1 << 20; }, StatusCode::kDataLoss,
       "vocabulary size"},
      {"sparse added", [](json& j) { j["added_tokens"][0]["id"] = 1 << 20; }, StatusCode::kDataLoss,
       "outside"},
      {"id twice", [](json& j) { j["model"]["vocab"]["abc"] = 256; }, StatusCode::kDataLoss, "256"},
      {"missing byte", [](json& j) { j["model"]["vocab"].erase("a"); }, StatusCode::kDataLoss, ""},
      {"merge unknown", [](json& j) { j["model"]["merges"].push_back("zz q"); }, StatusCode::kDataLoss,
       "merge 3"},
      {"merge three", [](json& j) { j["model"]["merges"].push_back("a b c"); }, StatusCode::kDataLoss,
       "merge 3"},
      {"merge result", [](json& j) { j["model"]["merges"].push_back("c a"); }, StatusCode::kDataLoss,
       "lacks"},
      {"merge number", [](json& j) { j["model"]["merges"].push_back(7); }, StatusCode::kDataLoss, "merge 3"},
      {"merges object", [](json& j) { j["model"]["merges"] = json::object(); }, StatusCode::kDataLoss,
       "merges"},
      {"nfc",
       [](json& j) {
         j["normalizer"] = {{"type", "NFC"}};
       },
       StatusCode::kUnimplemented, "NFC"},
      {"normalizer junk", [](json& j) { j["normalizer"] = 5; }, StatusCode::kUnimplemented, "normalizer"},
      {"pattern", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; },
       StatusCode::kUnimplemented, "\\w+"},
      {"string split",
       [](json& j) {
         j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}};
       },
       StatusCode::kUnimplemented, "Regex"},
      {"no pre_tokenizer", [](json& j) { j.erase("pre_tokenizer"); }, StatusCode::kUnimplemented,
       "ByteLevel"},
      {"prefix space",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
       },
       StatusCode::kUnimplemented, "add_prefix_space"},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, StatusCode::kUnimplemented, "dropout"},
      {"wordpiece", [](json& j) { j["model"]["type"] = "WordPiece"; }, StatusCode::kUnimplemented,
       "WordPiece"},
      {"decoder",
       [](json& j) {
         j["decoder"] = {{"type", "Metaspace"}};
       },
       StatusCode::kUnimplemented, "decoder"},
      {"lstrip", [](json& j) { j["added_tokens"][0]["lstrip"] = true; }, StatusCode::kUnimplemented,
       "lstrip"},
      {"added no id", [](json& j) { j["added_tokens"][0].erase("id"); }, StatusCode::kDataLoss,
       "added token"},
      {"added reuses id", [](json& j) { j["added_tokens"][0]["id"] = 256; }, StatusCode::kDataLoss, "reuses"},
      {"added twice", [](json& j) { j["added_tokens"][1]["content"] = "<a>b"; }, StatusCode::kDataLoss,
       "twice"},
      {"added empty", [](json& j) { j["added_tokens"][1]["content"] = ""; }, StatusCode::kDataLoss, "empty"},
  };
  for (const BadJsonCase& c : cases) {
    json j = SmallTokenizerJson();
    c.mutate(j);
    auto t = Tokenizer::FromHfJson(j.dump());
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), c.code) << c.name << ": " << t.status().ToString();
    EXPECT_NE(t.status().message().find(c.message), std::string::npos)
        << c.name << ": " << t.status().ToString();
  }
  for (const char* text : {"", "{", "[]", "null", "{\"model\": 1}", "{\"a\": 1, \"a\": 2}"}) {
    EXPECT_EQ(Tokenizer::FromHfJson(text).status().code(), StatusCode::kDataLoss) << text;
  }
}

std::string AllBytesRankFile() {
  std::string out;
  for (int b = 0; b < 256; ++b)
    out += Base64Encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  return out;
}

TEST(TokenizerTest, TiktokenRanksMergeLowestFirst) {
  // "ab" 256, "bc" 257, "abc" 258: "abc" merges "ab" first (lower rank), then "ab"+"c" is a token.
  const std::string ranks = AllBytesRankFile() + "YWI= 256\nYmM= 257\nYWJj 258\r\n\n";
  auto t = Tokenizer::FromTiktoken(ranks, Pretokenizer::KimiPattern(), {{"<|im_end|>", 300, true}});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Encode("abc"), (Ids{258}));
  // "abcbc": ab (256) first, then b+c (257) before ab+c (258), then "cbc" is no token.
  EXPECT_EQ(t->Encode("abcbc<|im_end|>"), (Ids{258, 257, 300}));
  EXPECT_EQ(t->vocab_size(), 301);
}

TEST(TokenizerTest, MalformedRankFileIsAnError) {
  const std::string bytes = AllBytesRankFile();
  const std::pair<std::string, const char*> cases[] = {
      {bytes + "YWI=\n", "line 257"},
      {bytes + "YW!= 256\n", "base64"},
      {bytes + "YWI= x\n", "rank 'x'"},
      {bytes + "YWI= 5\n", "rank 5"},
      {bytes + "YWI 256\n", "base64"},
      {bytes + "YWI= 99999999999\n", "below"},
      {bytes + "QQ== 256\n", "same bytes"},
      {bytes + "YWI= 99999999\n", "gap"},
      {"YWI= 0\n", "byte 0x00"},
  };
  for (const auto& [text, message] : cases) {
    auto t = Tokenizer::FromTiktoken(text, Pretokenizer::KimiPattern(), {});
    ASSERT_FALSE(t.ok()) << message;
    EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
    EXPECT_NE(t.status().message().find(message), std::string::npos) << t.status().ToString();
  }
  EXPECT_EQ(Tokenizer::FromTiktoken(bytes, "x+", {}).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Tokenizer::FromTiktoken(bytes, Pretokenizer::KimiPattern(), {{"<s>", 7, true}}).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(Tokenizer::LoadFile("/nonexistent/tokenizer.json").status().code(), StatusCode::kNotFound);
}

TEST(TokenizerTest, TestdataTokenizersRoundTripArbitraryBytes) {
  for (const char* file : {"/glm_like/tokenizer.json", "/kimi_like/tiktoken.model"}) {
    auto t = Tokenizer::LoadFile(std::string(TANDEM_TOKENIZER_TESTDATA) + file);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_GT(t->vocab_size(), 3000);
    std::mt19937 rng(7);
    for (int round = 0; round < 3000; ++round) {
      std::string text;
      const int n = static_cast<int>(rng() % 200);
      for (int i = 0; i < n; ++i) {
        // Mostly UTF-8 of small code points, some raw bytes and special-token text.
        const uint32_t r = rng() % 100;
        if (r < 60)
          text.push_back(static_cast<char>(0x20 + rng() % 0x5F));
        else if (r < 90)
          text += "é我ภ🙂\u0301 \n"[rng() % 16];
        else if (r < 98)
          text.push_back(static_cast<char>(rng()));
        else
          text += round % 2 ? "<|im_end|>" : "<|user|>";
      }
      const Ids ids = t->Encode(text);
      ASSERT_EQ(*t->DecodeBytes(ids), text) << file;
    }
  }
}

}  // namespace
}  // namespace tandem::engine::text
