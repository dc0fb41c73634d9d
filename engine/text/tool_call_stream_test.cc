// Streaming properties of both tool-call parsers: the result does not depend on how the text is
// split into deltas, no partial marker reaches the content early, and every byte is accounted for.

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/text/tool_call_parser.h"
#include "engine/text/tool_call_test_util.h"

namespace tandem::engine::text {
namespace {

using testing::Bytes;
using testing::RunStream;
using testing::StreamResult;

struct StreamCase {
  ChatFamily family;
  std::string text;
};

constexpr char kSchema[] =
    R"({"type":"function","function":{"name":"f","parameters":{"properties":{"n":{"type":"integer"}}}}})";

std::vector<StreamCase> Cases() {
  const std::string kimi_call =
      "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"n\": \"é<|\"}<|tool_call_end|>";
  const std::string glm_call = "<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>12</arg_value>\n</tool_call>";
  return {
      {ChatFamily::kKimiK2,
       "Sure — "
       "<|tool_calls_section_begin|>" +
           kimi_call +
           " <|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
           "<|tool_calls_section_end|> done <|tool_calls"},
      {ChatFamily::kKimiK2, "a<|tool_calls_section_begin|>junk" + kimi_call + "<|tool_call_begin|>x"},
      {ChatFamily::kKimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
       "{bad}<|tool_call_end|><|tool_calls_section_begin|><|tool_calls_section_end|>"},
      {ChatFamily::kKimiK2, "<<|<|tool_calls_section_begi<|tool_calls_section_begin|>   "},
      {ChatFamily::kGlm, "Hi.\n" + glm_call + "\n" + glm_call + "\n"},
      {ChatFamily::kGlm,
       "<tool_cal<tool_call>f<arg_key>n</arg_key><arg_value>x</arg_value></tool_call>  \n t"},
      {ChatFamily::kGlm,
       "<tool_call>f<tool_call>g\n</tool_call>\n<tool_call>bad name</tool_call> \n<tool_call>h"},
  };
}

void ExpectSame(const StreamResult& a, const StreamResult& b) {
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.calls, b.calls);
  EXPECT_EQ(a.stats.tool_call_parse_errors, b.stats.tool_call_parse_errors);
  EXPECT_EQ(a.stats.markup_bytes, b.stats.markup_bytes);
}

ToolParserOptions Options() {
  ToolParserOptions o;
  o.tools_json = {kSchema};
  return o;
}

TEST(ToolCallStream, EverySplitIntoTwoDeltasMatchesOneDelta) {
  for (const StreamCase& c : Cases()) {
    SCOPED_TRACE(c.text);
    StreamResult whole = RunStream(c.family, {c.text}, Options());
    EXPECT_EQ(whole.content.size() + whole.stats.markup_bytes, c.text.size());
    std::string_view text = c.text;
    for (size_t split = 0; split <= text.size(); ++split) {
      SCOPED_TRACE(split);
      ExpectSame(RunStream(c.family, {text.substr(0, split), text.substr(split)}, Options()), whole);
    }
  }
}

TEST(ToolCallStream, ByteByByteAndRandomSplitsMatchOneDelta) {
  std::mt19937 rng(7);
  for (const StreamCase& c : Cases()) {
    SCOPED_TRACE(c.text);
    StreamResult whole = RunStream(c.family, {c.text}, Options());
    ExpectSame(RunStream(c.family, Bytes(c.text), Options()), whole);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<std::string_view> pieces;
      std::string_view rest = c.text;
      while (!rest.empty()) {
        size_t n = std::uniform_int_distribution<size_t>(0, std::min<size_t>(rest.size(), 12))(rng);
        pieces.push_back(rest.substr(0, n));
        rest.remove_prefix(n);
      }
      ExpectSame(RunStream(c.family, pieces, Options()), whole);
    }
  }
}

TEST(ToolCallStream, PartialMarkerIsHeldBackUntilDecided) {
  auto parser = NewToolCallParser(ChatFamily::kKimiK2, {}).value();
  EXPECT_EQ(parser->Feed("Hello <|tool_calls_sec").content, "Hello ");
  EXPECT_EQ(parser->Feed("ond").content, "<|tool_calls_second");
  EXPECT_EQ(parser->Feed("<|tool").content, "");
  EXPECT_EQ(parser->Finish().content, "<|tool");

  auto glm = NewToolCallParser(ChatFamily::kGlm, {}).value();
  EXPECT_EQ(glm->Feed("a<tool").content, "a");
  ToolParseDelta d = glm->Feed("_call>f</tool_call>");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(glm->Feed("\n").content, "");  // could separate two calls: held back
  EXPECT_EQ(glm->Feed("ok").content, "\nok");
}

TEST(ToolCallStream, CallIsEmittedWhenItsEndArrives) {
  auto parser = NewToolCallParser(ChatFamily::kKimiK2, {}).value();
  EXPECT_TRUE(parser->Feed("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0").empty());
  EXPECT_TRUE(parser->Feed("<|tool_call_argument_begin|>{\"a\":").empty());
  ToolParseDelta d = parser->Feed("1}<|tool_call_end|><|tool_call_begin|>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":1}");
  EXPECT_TRUE(parser->Finish().content == "<|tool_call_begin|>");
  EXPECT_EQ(parser->stats().tool_call_parse_errors, 1);
}

}  // namespace
}  // namespace tandem::engine::text
