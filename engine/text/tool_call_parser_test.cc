// What the Kimi K2 and GLM parsers extract from whole responses, and how malformed calls degrade.

#include "engine/text/tool_call_parser.h"

#include <string>

#include <gtest/gtest.h>

#include "engine/text/tool_call_test_util.h"

namespace tandem::engine::text {
namespace {

using testing::RunStream;
using testing::StreamResult;

StreamResult Kimi(std::string_view text) { return RunStream(ChatFamily::kKimiK2, {text}); }

constexpr char kWeatherTool[] =
    R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"},"days":{"type":"integer"},"units":{"type":["string","null"]},)"
    R"("opts":{"type":"object"},"raw":{}}}}})";

StreamResult Glm(std::string_view text, bool with_schema = true) {
  ToolParserOptions options;
  if (with_schema) options.tools_json = {kWeatherTool};
  options.id_prefix = "call_x";
  return RunStream(ChatFamily::kGlm, {text}, options);
}

TEST(KimiToolParser, PlainTextPassesThrough) {
  StreamResult r = Kimi("Hello <|im_end|> <| world");
  EXPECT_EQ(r.content, "Hello <|im_end|> <| world");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.stats.tool_call_parse_errors, 0);
}

TEST(KimiToolParser, TwoCallsInOneSection) {
  StreamResult r = Kimi(
      "Let me check.<|tool_calls_section_begin|> <|tool_call_begin|> functions.get_weather:0 "
      "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>\n<|tool_call_begin|>"
      "functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].index, 0);
  EXPECT_EQ(r.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.stats.tool_calls, 2);
  EXPECT_EQ(r.stats.tool_call_parse_errors, 0);
}

TEST(KimiToolParser, IdWithoutPrefixOrIndex) {
  StreamResult r = Kimi(
      "<|tool_calls_section_begin|><|tool_call_begin|>search<|tool_call_argument_begin|>{\"q\":1}"
      "<|tool_call_end|><|tool_calls_section_end|>after");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].id, "search");
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(r.content, "after");
}

TEST(KimiToolParser, BadJsonBecomesContent) {
  const std::string call =
      "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": <|tool_call_end|>";
  StreamResult r = Kimi("<|tool_calls_section_begin|>" + call +
                        "<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
                        "<|tool_calls_section_end|>");
  EXPECT_EQ(r.content, call);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  EXPECT_EQ(r.calls[0].index, 0);
  EXPECT_EQ(r.stats.tool_call_parse_errors, 1);
}

TEST(KimiToolParser, NonObjectArgumentsAndMissingArgumentMarkerAreErrors) {
  for (std::string call : {"<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|>",
                           "<|tool_call_begin|>functions.f:0 {}<|tool_call_end|>",
                           "<|tool_call_begin|><|tool_call_argument_begin|>{}<|tool_call_end|>"}) {
    StreamResult r = Kimi("<|tool_calls_section_begin|>" + call + "<|tool_calls_section_end|>");
    EXPECT_EQ(r.content, call);
    EXPECT_EQ(r.stats.tool_call_parse_errors, 1);
  }
}

TEST(KimiToolParser, MissingEndAtEndOfStream) {
  StreamResult r = Kimi(
      "ok<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
      "<|tool_call_argument_begin|>{\"a\": 1");
  EXPECT_EQ(r.content, "ok<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1");
  EXPECT_EQ(r.stats.tool_call_parse_errors, 1);
  EXPECT_TRUE(r.calls.empty());
}

TEST(KimiToolParser, EmptySectionAtEndIsText) {
  StreamResult r = Kimi("a<|tool_calls_section_begin|> \n");
  EXPECT_EQ(r.content, "a<|tool_calls_section_begin|> \n");
  EXPECT_EQ(r.stats.tool_call_parse_errors, 1);
  EXPECT_EQ(r.stats.markup_bytes, 0);
}

TEST(KimiToolParser, UnclosedSectionKeepsCompleteCalls) {
  StreamResult r = Kimi(
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
      "<|tool_call_argument_begin|>{}<|tool_call_end|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.stats.tool_call_parse_errors, 0);
}

TEST(KimiToolParser, NestingIsAnError) {
  StreamResult r = Kimi(
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
      "<|tool_call_argument_begin|>{<|tool_call_begin|>functions.g:1"
      "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_begin|>x"
      "<|tool_calls_section_end|>");
  EXPECT_EQ(r.content,
            "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"
            "<|tool_calls_section_begin|>x");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  EXPECT_EQ(r.stats.tool_call_parse_errors, 3);
}

TEST(GlmToolParser, CallsWithSchemaTypes) {
  StreamResult r =
      Glm("Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
          "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>units</arg_key>\n<arg_value>7</"
          "arg_value>\n"
          "<arg_key>opts</arg_key>\n<arg_value>{\"a\": [1, true]}</arg_value>\n<arg_key>raw</arg_key>"
          "<arg_value>1</arg_value>\n</tool_call>\n<tool_call>get_time</tool_call>");
  EXPECT_EQ(r.content, "Checking.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "call_x0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","days":3,"units":"7","opts":{"a":[1,true]},"raw":"1"})");
  EXPECT_EQ(r.calls[1].id, "call_x1");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.stats.tool_call_parse_errors, 0);
}

TEST(GlmToolParser, WithoutSchemaValuesStayStrings) {
  StreamResult r = Glm("<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
                       /*with_schema=*/false);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"days":"3"})");
}

TEST(GlmToolParser, UnparsableTypedValueStaysAString) {
  StreamResult r =
      Glm("<tool_call>get_weather<arg_key>days</arg_key><arg_value>three</arg_value></tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"days":"three"})");
}

TEST(GlmToolParser, TextAfterCallsKeepsItsWhitespace) {
  StreamResult r = Glm("<tool_call>f</tool_call>\n\nDone.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "\n\nDone.");
}

TEST(GlmToolParser, MalformedCallsBecomeContent) {
  for (std::string call : {
           "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>",          // no value
           "<tool_call>get_weather\n<arg_value>x</arg_value>\n</tool_call>",         // no key
           "<tool_call>\n<arg_key>a</arg_key><arg_value>x</arg_value></tool_call>",  // no name
           "<tool_call>two words</tool_call>",                                       // bad name
           "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key>"
           "<arg_value>2</arg_value></tool_call>",                                       // duplicate key
           "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value> junk</tool_call>",  // stray text
       }) {
    SCOPED_TRACE(call);
    StreamResult r = Glm("x" + call + "y");
    EXPECT_EQ(r.content, "x" + call + "y");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.stats.tool_call_parse_errors, 1);
  }
}

TEST(GlmToolParser, NestedAndUnterminatedCalls) {
  StreamResult r = Glm("<tool_call>f<arg_key>a<tool_call>g</tool_call>tail<tool_call>h");
  EXPECT_EQ(r.content, "<tool_call>f<arg_key>atail<tool_call>h");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  EXPECT_EQ(r.stats.tool_call_parse_errors, 2);
}

TEST(ToolCallParser, BadToolSchemaIsAnError) {
  ToolParserOptions options;
  options.tools_json = {"{"};
  EXPECT_EQ(NewToolCallParser(ChatFamily::kGlm, options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(NewToolCallParser(ChatFamily::kKimiK2, options).ok());
}

TEST(ToolCallParser, SafeContentLength) {
  using internal::SafeContentLength;
  EXPECT_EQ(SafeContentLength("abc", "<tool_call>"), 3u);
  EXPECT_EQ(SafeContentLength("abc<tool", "<tool_call>"), 3u);
  EXPECT_EQ(SafeContentLength("abc<", "<tool_call>"), 3u);
  EXPECT_EQ(SafeContentLength("a<tool_call>b", "<tool_call>"), 1u);
  EXPECT_EQ(SafeContentLength("<tool_call", "<tool_call>"), 0u);
  EXPECT_EQ(SafeContentLength("", "<tool_call>"), 0u);
}

TEST(ToolCallParser, DeepJsonIsRejectedNotRecursedInto) {
  std::string deep(100000, '[');
  EXPECT_FALSE(internal::ParseJsonValue(deep).has_value());
  EXPECT_TRUE(internal::ParseJsonValue("[[1]]").has_value());
  EXPECT_TRUE(internal::ParseJsonValue(R"({"a":"[[[["})", 2).has_value());
}

}  // namespace
}  // namespace tandem::engine::text
