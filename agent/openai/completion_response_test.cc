// /v1/completions responses: text_completion bodies and chunks, echo, and legacy logprobs.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/openai/response.h"

namespace tandem::agent::openai {
namespace {

using engine::runtime::FinishReason;
using Json = nlohmann::json;

ResponseOptions Options() {
  ResponseOptions o;
  o.id = "cmpl-1";
  o.model = "m";
  o.created = 7;
  return o;
}

TokenPiece Piece(std::string text, std::vector<int32_t> tokens = {}) {
  TokenPiece p;
  p.text = std::move(text);
  for (int32_t t : tokens) {
    p.tokens.push_back(t);
    p.logprobs.push_back(-1.0f);
    p.top_logprobs.push_back({{t, -1.0f}, {99, -2.0f}});
  }
  return p;
}

std::vector<Json> Parse(const std::vector<std::string>& events) {
  std::vector<Json> out;
  EXPECT_EQ(events.back(), "data: [DONE]\n\n");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_TRUE(events[i].starts_with("data: ") && events[i].ends_with("\n\n")) << events[i];
    out.push_back(Json::parse(events[i].substr(6)));
  }
  return out;
}

TEST(CompletionBody, TextEchoAndUsage) {
  CompletionResponseBuilder b(Options());
  b.SetEcho("Say: ");
  b.Add(Piece("hello"));
  b.Add(Piece(" world"));
  Json body = Json::parse(b.Body(FinishReason::kLength, Usage{2, 2, 1}));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"], "cmpl-1");
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["text"], "Say: hello world");
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 4);
}

TEST(CompletionBody, LogprobsShape) {
  ResponseOptions o = Options();
  o.logprobs = true;
  o.top_logprobs = 1;
  CompletionResponseBuilder b(o);
  b.SetEcho("ab");
  b.Add(Piece("xy", {5, 6}));
  b.Add(Piece("z", {7}));
  Json lp = Json::parse(b.Body(FinishReason::kStop, {}))["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], (Json{"token_id:5", "token_id:6", "token_id:7"}));
  EXPECT_EQ(lp["token_logprobs"], (Json{-1.0, -1.0, -1.0}));
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"][0], (Json{{"token_id:5", -1.0}}));
  // Without a tokenizer a piece's tokens all start where the piece does (after the echo).
  EXPECT_EQ(lp["text_offset"], (Json{2, 2, 4}));
}

TEST(CompletionStream, ChunksFinishAndUsage) {
  ResponseOptions o = Options();
  o.include_usage = true;
  CompletionResponseBuilder b(o);
  b.SetEcho("P");
  std::vector<std::string> events;
  for (auto& e : b.StreamPiece(Piece("a"))) events.push_back(e);
  EXPECT_TRUE(b.StreamPiece(Piece("")).empty());
  for (auto& e : b.StreamPiece(Piece("b"))) events.push_back(e);
  for (auto& e : b.StreamFinish(FinishReason::kStop, Usage{1, 2, 0})) events.push_back(e);
  std::vector<Json> chunks = Parse(events);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0]["object"], "text_completion");
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "Pa");
  EXPECT_EQ(chunks[1]["choices"][0]["text"], "b");
  EXPECT_TRUE(chunks[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunks[1]["usage"].is_null());
  EXPECT_EQ(chunks[2]["choices"][0]["text"], "");
  EXPECT_EQ(chunks[2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[3]["choices"], Json::array());
  EXPECT_EQ(chunks[3]["usage"]["completion_tokens"], 2);
}

TEST(CompletionStream, LogprobsPerChunk) {
  ResponseOptions o = Options();
  o.logprobs = true;
  CompletionResponseBuilder b(o);
  std::vector<std::string> events = b.StreamPiece(Piece("q", {1}));
  for (auto& e : b.StreamFinish(FinishReason::kStop, {})) events.push_back(e);
  std::vector<Json> chunks = Parse(events);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["tokens"], Json{"token_id:1"});
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["top_logprobs"][0], Json::object());  // top_logprobs = 0
  EXPECT_TRUE(chunks[1]["choices"][0]["logprobs"].is_null());
}

TEST(CompletionStream, InvalidUtf8) {
  CompletionResponseBuilder b(Options());
  std::vector<std::string> events = b.StreamPiece(Piece("\xff"));
  for (auto& e : b.StreamFinish(FinishReason::kAbort, {})) events.push_back(e);
  std::vector<Json> chunks = Parse(events);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "\xef\xbf\xbd");
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "abort");
}

}  // namespace
}  // namespace tandem::agent::openai
