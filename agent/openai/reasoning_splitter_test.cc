// The <think> splitter: the rule of reasoning_splitter.h, and that no split of the text into
// pieces changes the result or lets a partial marker out early.

#include "agent/openai/reasoning_splitter.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::agent::openai::internal {
namespace {

struct Split {
  std::string reasoning;
  std::string content;
  std::string streamed;  // everything emitted before Finish, reasoning and content
};

Split RunSplitter(const std::vector<std::string_view>& pieces, bool prompt_opened = false) {
  ReasoningSplitter splitter(prompt_opened);
  Split out;
  for (std::string_view piece : pieces) {
    ReasoningSplitter::Output o = splitter.Feed(piece);
    out.reasoning += o.reasoning;
    out.content += o.content;
    out.streamed += o.reasoning + o.content;
  }
  ReasoningSplitter::Output o = splitter.Finish();
  out.reasoning += o.reasoning;
  out.content += o.content;
  return out;
}

struct Case {
  std::string text;
  bool prompt_opened;
  std::string reasoning;
  std::string content;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"<think>plan</think>answer", false, "plan", "answer"},
      {"\n<think>\nplan\n</think>\n\nanswer", false, "plan", "answer"},
      {"<think>a\n\nb</think>x\ny", false, "a\n\nb", "x\ny"},
      {"plain answer", false, "", "plain answer"},
      {"  hi <think>x</think>", false, "", "  hi <think>x</think>"},  // only a leading block counts
      {"<thin", false, "", "<thin"},                                  // never completed: content
      {"<think>cut off by max_tok", false, "cut off by max_tok", ""},
      {"<think>cut </thi", false, "cut </thi", ""},
      {"<think></think>", false, "", ""},
      {"<think>a</think>b</think>c", false, "a", "b</think>c"},
      {"reasoning</think>answer", true, "reasoning", "answer"},
      {"no close", true, "no close", ""},
      {"", false, "", ""},
      {"\n\n", false, "", "\n\n"},
  };
  return cases;
}

TEST(ReasoningSplitter, WholeText) {
  for (const Case& c : Cases()) {
    Split s = RunSplitter({c.text}, c.prompt_opened);
    EXPECT_EQ(s.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(s.content, c.content) << c.text;
  }
}

// Every way of cutting the text in two, and one byte per piece.
TEST(ReasoningSplitter, EverySplitPoint) {
  for (const Case& c : Cases()) {
    std::string_view text = c.text;
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      Split s = RunSplitter({text.substr(0, cut), text.substr(cut)}, c.prompt_opened);
      EXPECT_EQ(s.reasoning, c.reasoning) << c.text << " cut at " << cut;
      EXPECT_EQ(s.content, c.content) << c.text << " cut at " << cut;
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    Split s = RunSplitter(bytes, c.prompt_opened);
    EXPECT_EQ(s.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(s.content, c.content) << c.text;
  }
}

TEST(ReasoningSplitter, NoPartialMarkerStreamed) {
  const std::string text = "<think>abc</think>xyz";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Split s = RunSplitter({std::string_view(text).substr(0, cut)});
    EXPECT_EQ(s.streamed.find('<'), std::string::npos) << "cut at " << cut << ": " << s.streamed;
    EXPECT_EQ(s.streamed.find('>'), std::string::npos) << "cut at " << cut << ": " << s.streamed;
  }
}

TEST(ReasoningSplitter, StreamsReasoningAsItComes) {
  ReasoningSplitter splitter;
  EXPECT_EQ(splitter.Feed("<think>").reasoning, "");
  EXPECT_EQ(splitter.Feed("step one, ").reasoning, "step one, ");
  ReasoningSplitter::Output o = splitter.Feed("step two</think>Answer");
  EXPECT_EQ(o.reasoning, "step two");
  EXPECT_EQ(o.content, "Answer");
  EXPECT_EQ(splitter.Feed(" more").content, " more");
}

}  // namespace
}  // namespace tandem::agent::openai::internal
