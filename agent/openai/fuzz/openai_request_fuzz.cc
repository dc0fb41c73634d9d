// libFuzzer target: arbitrary bytes as a /v1/chat/completions and a /v1/completions body. Built
// with clang by scripts/fuzz.sh, not by CMake.
//
// When a body parses, text derived from it (the messages' content, the prompt) plays the model's
// output through the response builders, streamed in pieces and whole. Invariants beyond "no
// crash, no sanitizer report, no exception":
// - an error is a 4xx in [400, 413] with a message, and ErrorJson is valid JSON;
// - a parsed request's fields are within the ranges the parser promises;
// - every event is "data: <valid UTF-8 JSON>\n\n", the last one is exactly "data: [DONE]\n\n";
// - the streamed content, reasoning and tool calls reassemble to the non-streaming body's (the
//   pieces are cut at UTF-8 boundaries, as the detokenizer cuts); calls are indexed 0, 1, ...;
// - unless forwarding is on (half the inputs), every call returned names an offered function.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/openai/api.h"
#include "agent/openai/response.h"

namespace {

using nlohmann::json;
using tandem::agent::openai::ApiError;
using tandem::agent::openai::ChatCompletionRequest;
using tandem::agent::openai::ChatResponseBuilder;
using tandem::agent::openai::CompletionRequest;
using tandem::agent::openai::CompletionResponseBuilder;
using tandem::agent::openai::ResponseOptions;
using tandem::agent::openai::TokenPiece;
using tandem::agent::openai::ToolChoice;
using tandem::engine::runtime::FinishReason;
using tandem::engine::text::ChatFamily;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckError(const ApiError& e) {
  Check(e.status >= 400 && e.status <= 413 && !e.message.empty());
  Check(!json::parse(tandem::agent::openai::ErrorJson(e), nullptr, false).is_discarded());
}

// The JSON of each event, checking the framing; [DONE] only last.
std::vector<json> Events(const std::vector<std::string>& events) {
  Check(!events.empty() && events.back() == "data: [DONE]\n\n");
  std::vector<json> out;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const std::string& e = events[i];
    Check(e.starts_with("data: ") && e.ends_with("\n\n") && e.find('\n') == e.size() - 2);
    out.push_back(json::parse(e.begin() + 6, e.end() - 2, nullptr, false));
    Check(!out.back().is_discarded());
  }
  return out;
}

// Pieces of about `size` bytes, cut at UTF-8 character boundaries as the detokenizer cuts (text
// from a parsed JSON body is valid UTF-8).
std::vector<TokenPiece> Pieces(std::string_view text, size_t size) {
  std::vector<TokenPiece> pieces;
  while (!text.empty()) {
    size_t n = std::min(size, text.size());
    while (n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) ++n;
    TokenPiece p;
    p.text = std::string(text.substr(0, n));
    p.tokens = {static_cast<int32_t>(pieces.size())};
    p.logprobs = {-0.25f};
    p.top_logprobs = {{{1, -0.5f}, {2, -1.0f}}};
    pieces.push_back(std::move(p));
    text.remove_prefix(n);
  }
  return pieces;
}

void CheckChat(const ChatCompletionRequest& r, ChatFamily family, size_t piece_bytes) {
  Check(!r.chat.messages.empty());
  Check(r.params.temperature >= 0 && r.params.temperature <= 2 && r.params.top_p > 0 && r.params.top_p <= 1);
  Check(r.params.max_tokens >= 1 && r.params.min_tokens <= r.params.max_tokens && r.params.stop.size() <= 4);
  Check(r.params.logprobs >= -1 && r.params.logprobs <= 20 && r.params.top_k >= 0);
  Check(r.tool_choice != ToolChoice::kFunction || !r.chat.tools_json.empty());
  ResponseOptions o;
  o.id = "chatcmpl-fuzz";
  o.model = r.model;
  o.family = family;
  o.tools_json = r.chat.tools_json;
  o.tool_names = r.tool_names;
  o.tools_enabled = !r.chat.tools_json.empty() && r.tool_choice != ToolChoice::kNone;
  o.forward_unknown_tool_calls = piece_bytes % 2 == 0;  // both policies, as the input's size picks
  o.reasoning = family == ChatFamily::kGlm;
  o.logprobs = r.logprobs;
  o.top_logprobs = r.params.logprobs;
  o.include_usage = r.include_usage;
  auto streamed = ChatResponseBuilder::Create(o);
  auto whole = ChatResponseBuilder::Create(o);
  Check(streamed.ok() && whole.ok());  // the parser only keeps tools that are valid JSON
  std::string text;
  for (const auto& m : r.chat.messages) text += m.content;
  std::vector<std::string> events;
  for (const TokenPiece& p : Pieces(text, piece_bytes)) {
    for (auto& e : (*streamed)->StreamPiece(p)) events.push_back(std::move(e));
    (*whole)->Add(p);
  }
  for (auto& e : (*streamed)->StreamFinish(FinishReason::kStop, {})) events.push_back(std::move(e));
  std::string content, reasoning;
  size_t calls = 0;
  for (const json& chunk : Events(events)) {
    for (const json& choice : chunk["choices"]) {
      const json& delta = choice["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
      if (delta.contains("tool_calls") && delta["tool_calls"][0].contains("id")) {
        Check(delta["tool_calls"][0]["index"] == calls);  // 0, 1, ...: no gap where one was dropped
        ++calls;
      }
    }
  }
  json body = json::parse((*whole)->Body(FinishReason::kStop, {}), nullptr, false);
  Check(!body.is_discarded());
  const json& message = body["choices"][0]["message"];
  Check(content == (message["content"].is_null() ? std::string() : message["content"].get<std::string>()));
  Check(reasoning == message.value("reasoning_content", std::string()));
  Check(calls == message.value("tool_calls", json::array()).size());
  Check((*streamed)->made_tool_calls() == (calls > 0));
  Check((*streamed)->dropped_tool_calls() == (*whole)->dropped_tool_calls());
  // Dropping on: every call the client sees names a function the request offered.
  if (!o.forward_unknown_tool_calls) {
    std::vector<std::string> offered;
    for (const std::string& tool : r.chat.tools_json)
      offered.push_back(json::parse(tool)["function"]["name"]);
    const json returned = message.value("tool_calls", json::array());
    for (const json& call : returned) {
      const std::string name = call["function"]["name"];
      Check(std::find(offered.begin(), offered.end(), name) != offered.end());
    }
  } else {
    Check((*streamed)->dropped_tool_calls() == 0);
  }
}

void CheckCompletion(const CompletionRequest& r, size_t piece_bytes) {
  Check(r.prompt_is_tokens ? !r.prompt_tokens.empty() : !r.prompt_text.empty());
  Check(r.params.logprobs >= -1 && r.params.logprobs <= 5);
  ResponseOptions o;
  o.id = "cmpl-fuzz";
  o.logprobs = r.params.logprobs >= 0;
  o.top_logprobs = r.params.logprobs;
  o.include_usage = r.include_usage;
  CompletionResponseBuilder streamed(o);
  CompletionResponseBuilder whole(o);
  if (r.echo) {
    streamed.SetEcho(r.prompt_text);
    whole.SetEcho(r.prompt_text);
  }
  std::vector<std::string> events;
  for (const TokenPiece& p : Pieces(r.prompt_text, piece_bytes)) {
    for (auto& e : streamed.StreamPiece(p)) events.push_back(std::move(e));
    whole.Add(p);
  }
  for (auto& e : streamed.StreamFinish(FinishReason::kLength, {})) events.push_back(std::move(e));
  Events(events);
  Check(!json::parse(whole.Body(FinishReason::kLength, {}), nullptr, false).is_discarded());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const size_t piece_bytes = 1 + size % 7;
  auto chat = tandem::agent::openai::ParseChatCompletionRequest(body);
  if (const auto* e = std::get_if<ApiError>(&chat)) {
    CheckError(*e);
  } else {
    for (ChatFamily family : {ChatFamily::kKimiK2, ChatFamily::kGlm}) {
      CheckChat(std::get<ChatCompletionRequest>(chat), family, piece_bytes);
    }
  }
  auto completion = tandem::agent::openai::ParseCompletionRequest(body);
  if (const auto* e = std::get_if<ApiError>(&completion)) {
    CheckError(*e);
  } else {
    CheckCompletion(std::get<CompletionRequest>(completion), piece_bytes);
  }
  return 0;
}
