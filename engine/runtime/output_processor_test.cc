#include "engine/runtime/output_processor.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

struct Streamed {
  std::vector<std::string> deltas;
  std::string text;  // the deltas concatenated
  std::optional<FinishReason> finish;
  std::string detail;
  int32_t tokens_used = 0;
};

// Feeds `ids` until the processor finishes; if it never does, ends the request as cancelled.
Streamed Feed(const SamplingParams& p, const std::vector<int32_t>& ids, const Tokenizer* tok = &Glm()) {
  StatusOr<OutputProcessor> op = OutputProcessor::Create(p, tok, std::vector<int32_t>{kEos});
  EXPECT_TRUE(op.ok()) << op.status().ToString();
  Streamed run;
  auto take = [&](RequestOutput& out) {
    EXPECT_EQ(text::ToValidUtf8(out.text_delta), out.text_delta) << "a delta splits a character";
    run.deltas.push_back(out.text_delta);
    run.text += out.text_delta;
    if (out.finish) run.finish = out.finish, run.detail = out.finish_detail;
  };
  for (int32_t id : ids) {
    RequestOutput out;
    EXPECT_TRUE(op->Append(id, &out).ok());
    ++run.tokens_used;
    take(out);
    if (op->finished()) break;
  }
  if (!op->finished()) {
    RequestOutput out;
    op->Finish(FinishReason::kCancelled, "client went away", &out);
    take(out);
  }
  return run;
}

SamplingParams Stops(std::vector<std::string> stop, int32_t max_tokens = 1000) {
  SamplingParams p;
  p.stop = std::move(stop);
  p.max_tokens = max_tokens;
  return p;
}

// The index of the token holding byte `pos` of the text the ids decode to.
size_t TokenAt(const std::vector<int32_t>& ids, size_t pos) {
  size_t end = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    end += Glm().TokenBytes(ids[i])->size();
    if (pos < end) return i;
  }
  return ids.size();
}

const std::string kText = "Hello world, the quick brown fox. END here";

TEST(OutputProcessorTest, StreamsTheWholeTextWithoutStops) {
  const std::vector<int32_t> ids = Glm().Encode(kText);
  const Streamed r = Feed(Stops({}, static_cast<int32_t>(ids.size())), ids);
  EXPECT_EQ(r.text, kText);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens_used, static_cast<int32_t>(ids.size()));
}

TEST(OutputProcessorTest, StopStringsSplitOverTwoToFourTokens) {
  const std::vector<int32_t> ids = Glm().Encode(kText);
  for (const std::string stop : {"brown fox", " END", "llo wor"}) {
    SCOPED_TRACE(stop);
    const size_t start = kText.find(stop), end = start + stop.size();
    const size_t first = TokenAt(ids, start), last = TokenAt(ids, end - 1);
    ASSERT_GE(last - first + 1, 2u);  // test design: the stop string spans several tokens
    ASSERT_LE(last - first + 1, 4u);
    const Streamed r = Feed(Stops({stop}), ids);
    EXPECT_EQ(r.text, kText.substr(0, start));
    EXPECT_EQ(r.finish, FinishReason::kStop);
    EXPECT_EQ(r.detail, stop);
    EXPECT_EQ(r.tokens_used, static_cast<int32_t>(last + 1));  // finishes on the completing token
  }
}

TEST(OutputProcessorTest, OverlappingStopStringsTheFirstToEndWins) {
  const std::vector<int32_t> ids = Glm().Encode(kText);
  for (const auto& stops : {std::vector<std::string>{"quick brown", "brown fox"},
                            std::vector<std::string>{"brown fox", "quick brown"}}) {
    const Streamed r = Feed(Stops(stops), ids);
    EXPECT_EQ(r.text, "Hello world, the ");
    EXPECT_EQ(r.detail, "quick brown");
  }
  // Both end on the same byte: the longer (earlier starting) one wins, whatever the order.
  for (const auto& stops :
       {std::vector<std::string>{"the quick", "quick"}, std::vector<std::string>{"quick", "the quick"}}) {
    const Streamed r = Feed(Stops(stops), ids);
    EXPECT_EQ(r.text, "Hello world, ");
    EXPECT_EQ(r.detail, "the quick");
  }
}

TEST(OutputProcessorTest, AStopStringThatIsAPrefixOfAnother) {
  const std::vector<int32_t> ids = Glm().Encode(kText);
  const Streamed r = Feed(Stops({"fox. END", "fox"}), ids);
  EXPECT_EQ(r.text, "Hello world, the quick brown ");
  EXPECT_EQ(r.detail, "fox");
  // A near miss: "fox" is held back until "." shows it is not "fox!", then released.
  const Streamed miss = Feed(Stops({"fox!"}), ids);
  EXPECT_EQ(miss.text, kText);
  EXPECT_EQ(miss.finish, FinishReason::kCancelled);
  EXPECT_EQ(miss.detail, "client went away");
}

TEST(OutputProcessorTest, MultiByteCharactersSplitAcrossTokens) {
  const std::string text = "a🦀b🦀c";
  const std::vector<int32_t> ids = Glm().Encode(text);
  ASSERT_GT(ids.size(), 5u);  // test design: the crab is byte-level pieces in this vocabulary
  const Streamed all = Feed(Stops({}), ids);
  EXPECT_EQ(all.text, text);
  const Streamed cut = Feed(Stops({"🦀c"}), ids);
  EXPECT_EQ(cut.text, "a🦀b");
  EXPECT_EQ(cut.detail, "🦀c");
  // The stream ends inside a character: the final delta carries U+FFFD, as HF's decode would.
  std::vector<int32_t> partial(ids.begin(), ids.begin() + static_cast<long>(TokenAt(ids, 1) + 1));
  const std::string partial_bytes = *Glm().DecodeBytes(partial);
  ASSERT_NE(text::ToValidUtf8(partial_bytes), partial_bytes);  // test design: ends inside the crab
  const Streamed broken = Feed(Stops({}), partial);
  EXPECT_EQ(broken.text, "a\xEF\xBF\xBD");
}

TEST(OutputProcessorTest, HeldBackTextIsReleasedAtTheEnd) {
  const std::vector<int32_t> ids = Glm().Encode("the quick bro");
  const Streamed r = Feed(Stops({"brown"}), ids);
  EXPECT_EQ(r.text, "the quick bro");
  EXPECT_EQ(r.deltas.back(), "bro");  // held back until the request ended
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  // Ending by max_tokens flushes the held-back text too.
  const Streamed len = Feed(Stops({"brown"}, static_cast<int32_t>(ids.size())), ids);
  EXPECT_EQ(len.text, "the quick bro");
  EXPECT_EQ(len.finish, FinishReason::kLength);
}

}  // namespace
}  // namespace tandem::engine::runtime
