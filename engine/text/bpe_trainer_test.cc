#include "engine/text/bpe_trainer.h"

#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine::text {
namespace {

using Ids = std::vector<int32_t>;

std::string ReadCorpus() {
  std::ifstream in(std::string(TANDEM_TEXT_DATA_DIR) + "/tiny_corpus.txt", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::vector<std::string> kSpecials = {"[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_middle|>"};

BpeTrainerOptions Options(int64_t vocab_size, std::vector<std::string> specials = {}) {
  BpeTrainerOptions o;
  o.vocab_size = vocab_size;
  o.special_tokens = std::move(specials);
  return o;
}

// Pieces (Kimi pattern): "hug" " hug" " hug" " pug" " pun" " bun". By hand:
//   (u,g) 4 -> 256 "ug"; (h,"ug") 3 -> 257 "hug"; then three pairs seen twice, lowest
//   (left, right) first: (' ', p) -> 258 " p", (' ', "hug") -> 259 " hug", (u, n) -> 260 "un";
//   every pair left is seen once.
TEST(BpeTrainerTest, LearnsTheHandCheckedMergesInOrder) {
  StatusOr<BpeVocabulary> v = TrainBpe("hug hug hug pug pun bun", Options(261));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->ranks.size(), 261u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(v->ranks[b], std::string(1, static_cast<char>(b)));
  EXPECT_EQ(std::vector<std::string>(v->ranks.begin() + 256, v->ranks.end()),
            (std::vector<std::string>{"ug", "hug", " p", " hug", "un"}));
  using P = std::pair<int32_t, int32_t>;
  EXPECT_EQ(v->merges, (std::vector<P>{{'u', 'g'}, {'h', 256}, {' ', 'p'}, {' ', 257}, {'u', 'n'}}));
  EXPECT_EQ(v->corpus_pieces, 6);
  EXPECT_EQ(v->distinct_pieces, 5);

  StatusOr<BpeVocabulary> more = TrainBpe("hug hug hug pug pun bun", Options(262));
  EXPECT_EQ(more.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(more.status().message().find("supports only 261 tokens"), std::string::npos)
      << more.status().message();
  BpeTrainerOptions once = Options(262);
  once.min_pair_count = 1;
  EXPECT_TRUE(TrainBpe("hug hug hug pug pun bun", once).ok());
}

TEST(BpeTrainerTest, TiesGoToTheLowestLeftThenRightRank) {
  // Pieces "abcd" " abcd" " xy" " xy": (' ',x) (a,b) (b,c) (c,d) (x,y) are each seen twice.
  // Lowest left rank first: ' ' (32) -> " x"; then 'a' -> "ab"; then (c, d) beats (" x", y) and
  // ("ab", c) on the left rank ('c' = 99); then (" x" 256, y) before ("ab" 257, "cd" 258).
  StatusOr<BpeVocabulary> v = TrainBpe("abcd abcd xy xy", Options(261));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(std::vector<std::string>(v->ranks.begin() + 256, v->ranks.end()),
            (std::vector<std::string>{" x", "ab", "cd", " xy", "abcd"}));
}

TEST(BpeTrainerTest, SpecialTokensAreCutOutAndNumberedAfterTheRanks) {
  std::string corpus;
  for (int i = 0; i < 50; ++i) corpus += "<|im_user|>user<|im_middle|>hello there<|im_end|>";
  StatusOr<BpeVocabulary> v = TrainBpe(corpus, Options(270, kSpecials));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->ranks.size(), 270u - kSpecials.size());
  for (size_t rank = 256; rank < v->ranks.size(); ++rank) {
    EXPECT_EQ(v->ranks[rank].find('|'), std::string::npos) << v->ranks[rank];  // '|' is only in specials
  }
  ASSERT_EQ(v->special_tokens.size(), kSpecials.size());
  for (size_t i = 0; i < kSpecials.size(); ++i) {
    EXPECT_EQ(v->special_tokens[i].content, kSpecials[i]);
    EXPECT_EQ(v->special_tokens[i].id, static_cast<int32_t>(v->ranks.size() + i));
  }
  StatusOr<Tokenizer> t = TokenizerFromVocabulary(*v, Pretokenizer::KimiPattern());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->vocab_size(), 270);
  const Ids ids = t->Encode("<|im_user|>user<|im_middle|>hello<|im_end|>");
  EXPECT_EQ(ids.front(), *t->AddedTokenId("<|im_user|>"));
  EXPECT_EQ(ids.back(), *t->AddedTokenId("<|im_end|>"));
}

TEST(BpeTrainerTest, RejectsBadOptions) {
  EXPECT_EQ(TrainBpe("abc", Options(255)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TrainBpe("abc", Options(258, kSpecials)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TrainBpe("abc", Options(300, {"<a>", "<a>"})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TrainBpe("abc", Options(300, {""})).status().code(), StatusCode::kInvalidArgument);
  BpeTrainerOptions bad = Options(300);
  bad.pattern = "[a-z]+";
  EXPECT_EQ(TrainBpe("abc", bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(BpeTrainerTest, RankFileIsTiktokenBase64) {
  BpeVocabulary v;
  v.ranks = {"a", "ab", "abc", std::string("\0\xff", 2)};
  EXPECT_EQ(TiktokenRankFile(v), "YQ== 0\nYWI= 1\nYWJj 2\nAP8= 3\n");
}

class TinyCorpusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    corpus_ = new std::string(ReadCorpus());
    StatusOr<BpeVocabulary> v = TrainBpe(*corpus_, Options(4096, kSpecials));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vocab_ = new BpeVocabulary(*std::move(v));
  }
  static void TearDownTestSuite() {
    delete corpus_;
    delete vocab_;
  }
  static std::string* corpus_;
  static BpeVocabulary* vocab_;
};
std::string* TinyCorpusTest::corpus_ = nullptr;
BpeVocabulary* TinyCorpusTest::vocab_ = nullptr;

TEST_F(TinyCorpusTest, VocabularyIsConsistent) {
  ASSERT_GT(corpus_->size(), 100'000u);
  EXPECT_EQ(vocab_->total_size(), 4096);
  std::set<std::string> seen;
  for (const std::string& r : vocab_->ranks) EXPECT_TRUE(seen.insert(r).second) << "duplicate token " << r;
  for (const auto& [left, right] : vocab_->merges) {
    ASSERT_LT(left, static_cast<int32_t>(vocab_->ranks.size()));
    ASSERT_LT(right, static_cast<int32_t>(vocab_->ranks.size()));
    EXPECT_TRUE(seen.count(vocab_->ranks[left] + vocab_->ranks[right]));
  }
  EXPECT_GE(vocab_->merges.size(), vocab_->ranks.size() - 256);
}

TEST_F(TinyCorpusTest, TrainingIsDeterministic) {
  StatusOr<BpeVocabulary> again = TrainBpe(*corpus_, Options(4096, kSpecials));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ranks, vocab_->ranks);
  EXPECT_EQ(again->merges, vocab_->merges);
  EXPECT_EQ(TiktokenRankFile(*again), TiktokenRankFile(*vocab_));
}

TEST_F(TinyCorpusTest, TokenizerCompressesTheCorpusAndRoundTripsAnyBytes) {
  StatusOr<Tokenizer> t = TokenizerFromVocabulary(*vocab_, Pretokenizer::KimiPattern());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Ids corpus_ids = t->Encode(*corpus_);
  const double bytes_per_token =
      static_cast<double>(corpus_->size()) / static_cast<double>(corpus_ids.size());
  EXPECT_GT(bytes_per_token, 2.5);  // 2.8 measured; bytes alone would be 1.0
  EXPECT_EQ(*t->DecodeBytes(corpus_ids), *corpus_);

  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      switch (rng() % 4) {
        case 0: s.push_back(static_cast<char>(rng() % 256)); break;  // any byte, valid UTF-8 or not
        case 1: s += "<|im_end|>"; break;
        case 2: s += corpus_->substr(rng() % (corpus_->size() - 16), rng() % 16); break;
        default: {
          const uint32_t cp = rng() % 0x10FFFF;
          if (cp >= 0xD800 && cp < 0xE000) break;
          if (cp < 0x80) {
            s.push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            s += {static_cast<char>(0xC0 | cp >> 6), static_cast<char>(0x80 | (cp & 63))};
          } else if (cp < 0x10000) {
            s += {static_cast<char>(0xE0 | cp >> 12), static_cast<char>(0x80 | (cp >> 6 & 63)),
                  static_cast<char>(0x80 | (cp & 63))};
          } else {
            s += {static_cast<char>(0xF0 | cp >> 18), static_cast<char>(0x80 | (cp >> 12 & 63)),
                  static_cast<char>(0x80 | (cp >> 6 & 63)), static_cast<char>(0x80 | (cp & 63))};
          }
        }
      }
    }
    for (bool parse_special : {true, false}) {
      StatusOr<std::string> back = t->DecodeBytes(t->Encode(s, parse_special));
      ASSERT_TRUE(back.ok());
      ASSERT_EQ(*back, s) << "parse_special " << parse_special;
    }
  }
}

}  // namespace
}  // namespace tandem::engine::text
