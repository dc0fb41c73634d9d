// OutputProcessor: finishing by end-of-sequence, stop token ids, min_tokens and max_tokens; no
// tokenizer; and stop strings against a reference matcher on random text.

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/runtime/output_processor.h"
#include "engine/runtime/stop_reference.h"
#include "engine/text/detokenizer.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::runtime {
namespace {

using text::Tokenizer;

const Tokenizer& Glm() {
  static const Tokenizer* t = [] {
    auto loaded = Tokenizer::LoadFile(std::string(TANDEM_TOKENIZER_TESTDATA) + "/glm_like/tokenizer.json");
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return new Tokenizer(*std::move(loaded));
  }();
  return *t;
}

constexpr int32_t kEos = 0;  // <|endoftext|> in glm_like, a special token

struct Result {
  std::string text;
  std::optional<FinishReason> finish;
  std::string detail;
  int32_t tokens_used = 0;
};

Result Feed(const SamplingParams& p, const std::vector<int32_t>& ids, const Tokenizer* tok = &Glm()) {
  StatusOr<OutputProcessor> op = OutputProcessor::Create(p, tok, std::vector<int32_t>{kEos});
  EXPECT_TRUE(op.ok()) << op.status().ToString();
  Result r;
  for (int32_t id : ids) {
    if (op->finished()) break;
    RequestOutput out;
    EXPECT_TRUE(op->Append(id, &out).ok());
    ++r.tokens_used;
    r.text += out.text_delta;
    if (out.finish) r.finish = out.finish, r.detail = out.finish_detail;
  }
  return r;
}

std::vector<int32_t> Ids(const std::string& text) { return Glm().Encode(text); }

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(OutputProcessorFinishTest, EosStopsUnlessIgnoredAndNotBeforeMinTokens) {
  const std::vector<int32_t> hi = Ids("Hi there"), more = Ids(" and more");
  const std::vector<int32_t> ids = Concat(Concat(hi, {kEos}), more);
  SamplingParams p;
  p.max_tokens = 100;
  Result r = Feed(p, ids);
  EXPECT_EQ(r.text, "Hi there");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.detail, "");
  EXPECT_EQ(r.tokens_used, static_cast<int32_t>(hi.size() + 1));
  p.ignore_eos = true;  // eos is an ordinary (special, so skipped) token
  r = Feed(p, ids);
  EXPECT_EQ(r.text, "Hi there and more");
  EXPECT_FALSE(r.finish.has_value());
  p.ignore_eos = false;
  p.min_tokens = static_cast<int32_t>(hi.size()) + 1;  // the eos is token min_tokens: ignored
  r = Feed(p, Concat(ids, {kEos}));
  EXPECT_EQ(r.text, "Hi there and more");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens_used, static_cast<int32_t>(ids.size() + 1));
  p.min_tokens = static_cast<int32_t>(hi.size());  // the eos is token min_tokens + 1: it stops
  EXPECT_EQ(Feed(p, ids).tokens_used, static_cast<int32_t>(hi.size() + 1));
}

TEST(OutputProcessorFinishTest, StopTokenIdsAndStopStringsRespectMinTokens) {
  const std::vector<int32_t> ids = Ids("one. two. three.");
  const int32_t dot = Ids(".")[0];
  ASSERT_EQ(std::count(ids.begin(), ids.end(), dot), 3);  // test design
  SamplingParams p;
  p.max_tokens = 100;
  p.stop_token_ids = {dot};
  Result r = Feed(p, ids);
  EXPECT_EQ(r.text, "one");  // the stop token's own text is not emitted
  EXPECT_EQ(r.detail, std::to_string(dot));
  // The first dot is token number min_tokens: it cannot stop; the second can.
  p.min_tokens = static_cast<int32_t>(std::find(ids.begin(), ids.end(), dot) - ids.begin()) + 1;
  EXPECT_EQ(Feed(p, ids).text, "one. two");
  p.stop_token_ids.clear();
  p.stop = {"."};
  EXPECT_EQ(Feed(p, ids).text, "one. two");
  p.min_tokens = 0;
  EXPECT_EQ(Feed(p, ids).text, "one");
}

TEST(OutputProcessorFinishTest, MaxTokensFinishesWithLengthAndStopWinsOnTheSameToken) {
  const std::vector<int32_t> ids = Ids("Hello world, the quick brown fox");
  SamplingParams p;
  p.max_tokens = 3;
  p.stop = {"xyz"};
  Result r = Feed(p, ids);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens_used, 3);
  EXPECT_EQ(r.text, *Glm().DecodeBytes(std::vector<int32_t>(ids.begin(), ids.begin() + 3)));
  p.stop = {r.text.substr(r.text.size() - 2)};  // completes on the third token
  Result s = Feed(p, ids);
  EXPECT_EQ(s.finish, FinishReason::kStop);
  EXPECT_EQ(s.text, r.text.substr(0, r.text.size() - 2));
  // Nothing is accepted after the end; a negative id is an error.
  StatusOr<OutputProcessor> op = OutputProcessor::Create(p, &Glm(), {});
  RequestOutput out;
  EXPECT_EQ(op->Append(-1, &out).code(), StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(op->Append(ids[i], &out).ok());
  EXPECT_EQ(op->Append(ids[3], &out).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(op->num_tokens(), 3);
}

TEST(OutputProcessorFinishTest, WorksWithoutATokenizerOnlyWithoutStopStrings) {
  SamplingParams p;
  p.stop = {"x"};
  EXPECT_EQ(OutputProcessor::Create(p, nullptr, {}).status().code(), StatusCode::kInvalidArgument);
  p.stop.clear();
  p.stop_token_ids = {7};
  Result r = Feed(p, {100, 200, 7, 300}, nullptr);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens_used, 3);
  // Ids past the tokenizer's vocabulary (a padded model vocabulary) add no text.
  EXPECT_EQ(Feed(SamplingParams{}, Concat(Ids("ok"), {Glm().vocab_size() + 5})).text, "ok");
}

TEST(OutputProcessorFinishTest, RandomTextMatchesTheReferenceMatcher) {
  const std::vector<std::string> alphabet = {"a", "b", "ab", " ", "é", "🦀", "the", "\n"};
  std::mt19937 rng(17);
  auto random_text = [&](int pieces) {
    std::string s;
    for (int i = 0; i < pieces; ++i) s += alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    const std::string text = random_text(5 + static_cast<int>(rng() % 30));
    SamplingParams p;
    p.max_tokens = 1000;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
      p.stop.push_back(random_text(1 + static_cast<int>(rng() % 3)));
    std::string matched;
    const std::string want = ReferenceStopCut(text, p.stop, &matched);
    StatusOr<OutputProcessor> op = OutputProcessor::Create(p, &Glm(), {});
    ASSERT_TRUE(op.ok());
    std::string got;
    RequestOutput last;
    for (int32_t id : Ids(text)) {
      RequestOutput out;
      ASSERT_TRUE(op->Append(id, &out).ok());
      ASSERT_EQ(text::ToValidUtf8(out.text_delta), out.text_delta);
      got += out.text_delta;
      last = out;
      if (op->finished()) break;
    }
    if (!op->finished()) {
      RequestOutput end;
      op->Finish(FinishReason::kCancelled, "", &end);
      got += end.text_delta;
      last = end;
    }
    ASSERT_EQ(got, want) << "text '" << text << "' stop[0] '" << p.stop[0] << "'";
    EXPECT_EQ(last.finish, matched.empty() ? FinishReason::kCancelled : FinishReason::kStop);
    if (!matched.empty()) {
      EXPECT_EQ(last.finish_detail, matched);
    }
  }
}

}  // namespace
}  // namespace tandem::engine::runtime
