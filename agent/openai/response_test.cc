// Chat responses: SSE event shape, streamed Kimi / GLM tool calls, GLM reasoning, logprobs, the
// non-streaming body, and invalid UTF-8 in model text.

#include "agent/openai/response.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "engine/text/tokenizer.h"

namespace tandem::agent::openai {
namespace {

using engine::runtime::FinishReason;
using engine::text::ChatFamily;
using Json = nlohmann::json;

// Checks the framing of every event and parses the JSON ones; [DONE] must come last and only there.
std::vector<Json> ParseEvents(const std::vector<std::string>& events) {
  std::vector<Json> out;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& e = events[i];
    EXPECT_EQ(e.rfind("data: ", 0), 0u) << e;
    EXPECT_TRUE(e.size() >= 8 && e.ends_with("\n\n")) << e;
    if (e == "data: [DONE]\n\n") {
      EXPECT_EQ(i + 1, events.size()) << "[DONE] is not last";
      continue;
    }
    EXPECT_EQ(e.find('\n'), e.size() - 2) << "newline inside an event: " << e;
    out.push_back(Json::parse(e.substr(6, e.size() - 8)));  // throws (fails the test) if invalid
  }
  return out;
}

ResponseOptions Options() {
  ResponseOptions o;
  o.id = "chatcmpl-abc";
  o.model = "kimi";
  o.created = 1700000000;
  return o;
}

std::unique_ptr<ChatResponseBuilder> Builder(const ResponseOptions& options) {
  auto b = ChatResponseBuilder::Create(options);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return *std::move(b);
}

TokenPiece Text(std::string text) {
  TokenPiece p;
  p.text = std::move(text);
  return p;
}

// What a client reassembles from a chat stream.
struct Reassembled {
  std::string content;
  std::string reasoning;
  std::map<int, Json> calls;  // index -> {"id", "name", "arguments"}
  std::vector<size_t> argument_piece_bytes;
  std::string finish_reason;
  std::vector<std::string> content_deltas;
  Json usage;
  Json logprobs = Json::array();
  std::vector<Json> chunks;
};

Reassembled Stream(ChatResponseBuilder& b, const std::vector<std::string>& pieces,
                   FinishReason reason = FinishReason::kStop) {
  std::vector<std::string> events;
  for (const std::string& piece : pieces) {
    for (auto& e : b.StreamPiece(Text(piece))) events.push_back(std::move(e));
  }
  for (auto& e : b.StreamFinish(reason, Usage{10, 5, 4})) events.push_back(std::move(e));
  EXPECT_EQ(events.back(), "data: [DONE]\n\n");
  Reassembled r;
  r.chunks = ParseEvents(events);
  for (const Json& chunk : r.chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], "chatcmpl-abc");
    if (chunk.contains("usage") && !chunk["usage"].is_null()) r.usage = chunk["usage"];
    for (const Json& choice : chunk["choices"]) {
      const Json& delta = choice["delta"];
      if (delta.contains("content")) {
        r.content += delta["content"].get<std::string>();
        r.content_deltas.push_back(delta["content"]);
      }
      if (delta.contains("reasoning_content")) r.reasoning += delta["reasoning_content"].get<std::string>();
      for (const Json& call : delta.value("tool_calls", Json::array())) {
        Json& c = r.calls[call["index"].get<int>()];
        if (call.contains("id")) {
          EXPECT_FALSE(c.contains("id")) << "a call's id sent twice";
          EXPECT_EQ(call["type"], "function");
          c["id"] = call["id"];
          c["name"] = call["function"]["name"];
          c["arguments"] = "";
        }
        std::string piece = call["function"]["arguments"];
        if (!call.contains("id")) r.argument_piece_bytes.push_back(piece.size());
        c["arguments"] = c["arguments"].get<std::string>() + piece;
      }
      if (!choice["logprobs"].is_null()) {
        for (const Json& entry : choice["logprobs"]["content"]) r.logprobs.push_back(entry);
      }
      if (!choice["finish_reason"].is_null()) r.finish_reason = choice["finish_reason"];
    }
  }
  return r;
}

TEST(ChatStream, PlainText) {
  ResponseOptions o = Options();
  o.include_usage = true;
  auto b = Builder(o);
  Reassembled r = Stream(*b, {"Hel", "lo ", "", "world"});
  EXPECT_EQ(r.content, "Hello world");
  EXPECT_EQ(r.finish_reason, "stop");
  ASSERT_GE(r.chunks.size(), 4u);
  EXPECT_EQ(r.chunks[0]["choices"][0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(r.chunks[0]["choices"][0]["finish_reason"].is_null());
  for (size_t i = 0; i + 1 < r.chunks.size(); ++i) {
    EXPECT_TRUE(r.chunks[i].contains("usage") && r.chunks[i]["usage"].is_null()) << r.chunks[i];
  }
  const Json& finish = r.chunks[r.chunks.size() - 2];
  EXPECT_EQ(finish["choices"][0]["delta"], Json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  const Json& usage = r.chunks.back();
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"], (Json{{"prompt_tokens", 10},
                                  {"completion_tokens", 5},
                                  {"total_tokens", 15},
                                  {"prompt_tokens_details", {{"cached_tokens", 4}}}}));
  EXPECT_FALSE(b->made_tool_calls());
}

TEST(ChatStream, NoUsageWithoutIncludeUsageAndLengthFinish) {
  auto b = Builder(Options());
  Reassembled r = Stream(*b, {"a"}, FinishReason::kLength);
  EXPECT_EQ(r.finish_reason, "length");
  for (const Json& chunk : r.chunks) EXPECT_FALSE(chunk.contains("usage"));
  EXPECT_TRUE(b->StreamFinish(FinishReason::kStop, {}).empty());  // once only
}

TEST(ChatStream, FinishWithoutPiecesStillSendsRole) {
  auto b = Builder(Options());
  Reassembled r = Stream(*b, {});
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(r.finish_reason, "stop");
}

constexpr char kKimiOutput[] =
    "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"Paris\", \"note\": \"caf\xc3\xa9 "
    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}"
    "<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}"
    "<|tool_call_end|><|tool_calls_section_end|>";

// The text in pieces of `size` bytes.
std::vector<std::string> Chunks(std::string_view text, size_t size) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); i += size) out.emplace_back(text.substr(i, size));
  return out;
}

TEST(ChatStream, KimiToolCalls) {
  for (size_t size : {1, 3, 7, 1000}) {
    ResponseOptions o = Options();
    o.tools_enabled = true;
    auto b = Builder(o);
    Reassembled r = Stream(*b, Chunks(kKimiOutput, size));
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0]["id"], "functions.get_weather:0");
    EXPECT_EQ(r.calls[0]["name"], "get_weather");
    EXPECT_EQ(r.calls[0]["arguments"],
              "{\"city\": \"Paris\", \"note\": \"caf\xc3\xa9 \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}");
    EXPECT_EQ(r.calls[1]["name"], "get_time");
    EXPECT_EQ(r.calls[1]["arguments"], "{}");
    EXPECT_GT(r.argument_piece_bytes.size(), 3u);  // streamed piecewise
    for (size_t n : r.argument_piece_bytes) EXPECT_LE(n, 16u);
    EXPECT_EQ(r.finish_reason, "tool_calls");
    EXPECT_TRUE(b->made_tool_calls());
    for (const std::string& d : r.content_deltas) EXPECT_EQ(d.find("<|"), std::string::npos) << d;
  }
}

// Options for a request offering these functions: their declarations as ParseTools keeps them,
// and their names.
ResponseOptions Offering(const std::vector<std::string>& names) {
  ResponseOptions o = Options();
  o.tools_enabled = true;
  for (const std::string& name : names) {
    o.tools_json.push_back(R"({"type":"function","function":{"name":")" + name +
                           R"(","parameters":{"type":"object"}}})");
  }
  o.tool_names = names;
  return o;
}

TEST(ChatStream, CallsToFunctionsNotOfferedAreDropped) {
  for (size_t size : {1, 5, 1000}) {
    ResponseOptions o = Offering({"get_time", "book_table"});  // get_weather is not offered
    auto b = Builder(o);
    Reassembled r = Stream(*b, Chunks(kKimiOutput, size));
    EXPECT_EQ(r.content, "Let me check.");  // the dropped call's markup is consumed, not content
    ASSERT_EQ(r.calls.size(), 1u);
    ASSERT_TRUE(r.calls.count(0));  // the kept call takes index 0: no gap where one was dropped
    EXPECT_EQ(r.calls[0]["name"], "get_time");
    EXPECT_EQ(r.calls[0]["id"], "functions.get_time:1");
    EXPECT_EQ(r.finish_reason, "tool_calls");
    EXPECT_EQ(b->dropped_tool_calls(), 1);

    auto whole = Builder(o);
    for (const std::string& piece : Chunks(kKimiOutput, size)) whole->Add(Text(piece));
    Json body = Json::parse(whole->Body(FinishReason::kStop, Usage{}));
    const Json& message = body["choices"][0]["message"];
    ASSERT_EQ(message["tool_calls"].size(), 1u);
    EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_time");
    EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(whole->dropped_tool_calls(), 1);
  }
}

TEST(ChatStream, EveryCallDroppedFinishesAsStop) {
  ResponseOptions o = Offering({"book_table"});
  auto b = Builder(o);
  Reassembled r = Stream(*b, {kKimiOutput});
  EXPECT_EQ(r.content, "Let me check.");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_FALSE(b->made_tool_calls());
  EXPECT_EQ(b->dropped_tool_calls(), 2);
}

TEST(ChatStream, ForwardingKeepsCallsToFunctionsNotOffered) {
  ResponseOptions o = Offering({"book_table"});
  o.forward_unknown_tool_calls = true;
  auto b = Builder(o);
  Reassembled r = Stream(*b, {kKimiOutput});
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0]["name"], "get_weather");
  EXPECT_EQ(r.calls[1]["name"], "get_time");
  EXPECT_EQ(b->dropped_tool_calls(), 0);
}

TEST(ChatStream, ToolsDisabledLeavesMarkupAsContent) {
  auto b = Builder(Options());
  Reassembled r = Stream(*b, {kKimiOutput});
  EXPECT_EQ(r.content, kKimiOutput);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.finish_reason, "stop");
}

constexpr char kGlmTool[] =
    R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}})";

ResponseOptions GlmOptions() {
  ResponseOptions o = Options();
  o.family = ChatFamily::kGlm;
  o.model = "glm";
  o.tools_json = {kGlmTool};
  o.tools_enabled = true;
  o.reasoning = true;
  return o;
}

TEST(ChatStream, GlmReasoningThenToolCall) {
  const std::string text =
      "<think>\nThe user wants weather.\n</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
      "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
  for (size_t size : {1, 2, 5, 1000}) {
    auto b = Builder(GlmOptions());
    Reassembled r = Stream(*b, Chunks(text, size));
    EXPECT_EQ(r.reasoning, "The user wants weather.");
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0]["id"], "call_abc_0");
    EXPECT_EQ(r.calls[0]["name"], "get_weather");
    EXPECT_EQ(r.calls[0]["arguments"], R"({"city":"Paris","days":3})");
    EXPECT_EQ(r.finish_reason, "tool_calls");
  }
}

TEST(ChatStream, GlmReasoningMarkersSplitAtEveryPoint) {
  const std::string text = "<think>ab</think>cd";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= text.size(); ++cut2) {
      auto b = Builder(GlmOptions());
      Reassembled r = Stream(*b, {text.substr(0, cut), text.substr(cut, cut2 - cut), text.substr(cut2)});
      EXPECT_EQ(r.reasoning, "ab") << cut << "," << cut2;
      EXPECT_EQ(r.content, "cd") << cut << "," << cut2;
    }
  }
}

TEST(ChatStream, GlmPromptOpenedThink) {
  ResponseOptions o = GlmOptions();
  o.prompt_opened_think = true;
  auto b = Builder(o);
  Reassembled r = Stream(*b, {"hmm</th", "ink>Hi"});
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_EQ(r.content, "Hi");
  EXPECT_EQ(r.finish_reason, "stop");
}

engine::text::Tokenizer BytesTokenizer() {
  std::string ranks;
  for (int b = 0; b < 256; ++b) {
    ranks += Base64Encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  }
  auto t = engine::text::Tokenizer::FromTiktoken(ranks, engine::text::Pretokenizer::KimiPattern(), {});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *std::move(t);
}

TokenPiece WithLogprobs(std::string text) {
  TokenPiece p;
  for (unsigned char c : text) {
    p.tokens.push_back(c);
    p.logprobs.push_back(-0.5f);
    p.top_logprobs.push_back({{c, -0.5f}, {'z', -1.5f}, {'q', -3.0f}});
  }
  p.text = std::move(text);
  return p;
}

TEST(ChatStream, LogprobsShape) {
  const engine::text::Tokenizer tokenizer = BytesTokenizer();
  ResponseOptions o = Options();
  o.logprobs = true;
  o.top_logprobs = 2;
  o.tokenizer = &tokenizer;
  auto b = Builder(o);
  std::vector<std::string> events;
  for (std::string piece : {"h", "i\xc3"}) {
    for (auto& e : b->StreamPiece(WithLogprobs(piece))) events.push_back(e);
  }
  for (auto& e : b->StreamFinish(FinishReason::kStop, {})) events.push_back(e);
  Json entries = Json::array();
  for (const Json& chunk : ParseEvents(events)) {
    const Json& lp = chunk["choices"][0]["logprobs"];
    if (!lp.is_null()) {
      for (const Json& e : lp["content"]) entries.push_back(e);
    }
  }
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0]["token"], "h");
  EXPECT_EQ(entries[0]["logprob"], -0.5);
  EXPECT_EQ(entries[0]["bytes"], Json::array({104}));
  ASSERT_EQ(entries[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(entries[0]["top_logprobs"][1], (Json{{"token", "z"}, {"logprob", -1.5}, {"bytes", {122}}}));
  EXPECT_EQ(entries[2]["bytes"], Json::array({0xc3}));  // a partial character: its raw byte
}

TEST(ChatStream, LogprobsWithoutTokenizer) {
  ResponseOptions o = Options();
  o.logprobs = true;
  auto b = Builder(o);
  b->Add(WithLogprobs("a"));
  Json body = Json::parse(b->Body(FinishReason::kStop, {}));
  const Json& entry = body["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(entry["token"], "token_id:97");
  EXPECT_TRUE(entry["bytes"].is_null());
  EXPECT_EQ(entry["top_logprobs"], Json::array());
}

}  // namespace
}  // namespace tandem::agent::openai
