#include "agent/openai/response.h"

#include <algorithm>
#include <optional>

#include "agent/openai/reasoning_splitter.h"
#include "agent/openai/response_json.h"
#include "engine/text/tool_call_parser.h"

namespace tandem::agent::openai {

using engine::runtime::FinishReason;
using engine::text::ParsedToolCall;
using internal::Json;
using internal::Sse;

namespace {

// Arguments are streamed in pieces this size (OpenAI streams them a few tokens at a time).
constexpr size_t kArgumentPieceBytes = 16;

// What the model's text turned into, in the order a client should see it.
struct Produced {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// Unique per response, so GLM's call ids ("call_<id>_0") do not collide across responses.
std::string ToolCallIdPrefix(std::string_view response_id) {
  size_t dash = response_id.rfind('-');
  if (dash != std::string_view::npos) response_id.remove_prefix(dash + 1);
  if (response_id.empty()) return "call_";
  return "call_" + std::string(response_id) + "_";
}

Json ToolCallJson(const ParsedToolCall& call) {
  Json out;
  out["id"] = call.id;
  out["type"] = "function";
  out["function"] = Json{{"name", call.name}, {"arguments", call.arguments}};
  return out;
}

}  // namespace

std::string FinishReasonFor(FinishReason reason, bool made_tool_calls) {
  switch (reason) {
    case FinishReason::kStop: return made_tool_calls ? "tool_calls" : "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort:
    case FinishReason::kCancelled:
    case FinishReason::kRejected: return "abort";
  }
  return "abort";
}

struct ChatResponseBuilder::State {
  ResponseOptions options;
  std::unique_ptr<engine::text::ToolCallParser> parser;  // null: tool calls are not parsed
  std::optional<internal::ReasoningSplitter> splitter;   // set: <think> goes to reasoning_content
  bool role_sent = false;
  bool finished = false;
  int tool_calls = 0;             // calls passed on (their streaming index is this count)
  int dropped_tool_calls = 0;     // calls naming a function the request did not offer
  Produced total;                 // non-streaming: everything so far
  Json logprobs = Json::array();  // non-streaming: all entries; streaming: not yet sent

  // The model's text through the splitter, then the content through the tool-call parser.
  Produced Process(std::string_view text, bool at_end) {
    Produced out;
    internal::ReasoningSplitter::Output split;
    if (splitter) {
      split = at_end ? splitter->Finish() : splitter->Feed(text);
    } else {
      split.content = std::string(text);
    }
    out.reasoning = std::move(split.reasoning);
    if (parser) {
      engine::text::ToolParseDelta delta = parser->Feed(split.content);
      if (at_end) {
        engine::text::ToolParseDelta last = parser->Finish();
        delta.content += last.content;
        for (auto& call : last.tool_calls) delta.tool_calls.push_back(std::move(call));
      }
      out.content = std::move(delta.content);
      out.calls = std::move(delta.tool_calls);
    } else {
      out.content = std::move(split.content);
    }
    if (!options.forward_unknown_tool_calls && !options.tool_names.empty()) {
      const std::vector<std::string>& offered = options.tool_names;
      const size_t before = out.calls.size();
      std::erase_if(out.calls, [&offered](const ParsedToolCall& call) {
        return std::find(offered.begin(), offered.end(), call.name) == offered.end();
      });
      dropped_tool_calls += static_cast<int>(before - out.calls.size());
    }
    for (ParsedToolCall& call : out.calls) call.index = tool_calls++;  // no gap where one was dropped
    return out;
  }

  // A chat.completion.chunk; pending logprobs ride on the first chunk that carries a delta.
  std::string Chunk(Json delta, Json finish_reason, bool with_logprobs) {
    Json choice;
    choice["index"] = 0;
    choice["delta"] = std::move(delta);
    if (with_logprobs && options.logprobs && !logprobs.empty()) {
      choice["logprobs"] = Json{{"content", std::move(logprobs)}};
      logprobs = Json::array();
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = std::move(finish_reason);
    Json chunk = internal::Head(options, "chat.completion.chunk");
    chunk["choices"] = Json::array({std::move(choice)});
    if (options.include_usage) chunk["usage"] = nullptr;
    return Sse(chunk);
  }

  void SendRole(std::vector<std::string>& events) {
    if (role_sent) return;
    role_sent = true;
    events.push_back(Chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr, false));
  }

  void SendProduced(const Produced& p, std::vector<std::string>& events) {
    if (!p.reasoning.empty())
      events.push_back(Chunk(Json{{"reasoning_content", p.reasoning}}, nullptr, true));
    if (!p.content.empty()) events.push_back(Chunk(Json{{"content", p.content}}, nullptr, true));
    for (const ParsedToolCall& call : p.calls) {
      Json head{{"index", call.index},
                {"id", call.id},
                {"type", "function"},
                {"function", Json{{"name", call.name}, {"arguments", ""}}}};
      events.push_back(Chunk(Json{{"tool_calls", Json::array({std::move(head)})}}, nullptr, true));
      for (std::string_view piece : internal::SplitUtf8(call.arguments, kArgumentPieceBytes)) {
        Json args{{"index", call.index}, {"function", Json{{"arguments", piece}}}};
        events.push_back(Chunk(Json{{"tool_calls", Json::array({std::move(args)})}}, nullptr, true));
      }
    }
  }

  void Accumulate(Produced p) {
    total.reasoning += p.reasoning;
    total.content += p.content;
    for (auto& call : p.calls) total.calls.push_back(std::move(call));
  }
};

StatusOr<std::unique_ptr<ChatResponseBuilder>> ChatResponseBuilder::Create(const ResponseOptions& options) {
  auto state = std::make_unique<State>();
  state->options = options;
  if (options.tools_enabled) {
    engine::text::ToolParserOptions parser_options;
    parser_options.tools_json = options.tools_json;
    parser_options.id_prefix = ToolCallIdPrefix(options.id);
    ASSIGN_OR_RETURN(state->parser, engine::text::NewToolCallParser(options.family, parser_options));
  }
  if (options.reasoning) state->splitter.emplace(options.prompt_opened_think);
  return std::unique_ptr<ChatResponseBuilder>(new ChatResponseBuilder(std::move(state)));
}

ChatResponseBuilder::ChatResponseBuilder(std::unique_ptr<State> state) : state_(std::move(state)) {}
ChatResponseBuilder::~ChatResponseBuilder() = default;

bool ChatResponseBuilder::made_tool_calls() const { return state_->tool_calls > 0; }

int ChatResponseBuilder::dropped_tool_calls() const { return state_->dropped_tool_calls; }

std::vector<std::string> ChatResponseBuilder::StreamPiece(const TokenPiece& piece) {
  std::vector<std::string> events;
  if (state_->finished) return events;
  state_->SendRole(events);
  if (state_->options.logprobs) internal::AppendChatLogprobs(state_->options, piece, state_->logprobs);
  state_->SendProduced(state_->Process(piece.text, false), events);
  return events;
}

std::vector<std::string> ChatResponseBuilder::StreamFinish(FinishReason reason, const Usage& usage) {
  std::vector<std::string> events;
  if (state_->finished) return events;
  state_->SendRole(events);
  state_->SendProduced(state_->Process({}, true), events);
  state_->finished = true;
  events.push_back(state_->Chunk(Json::object(), FinishReasonFor(reason, made_tool_calls()), true));
  if (state_->options.include_usage) {
    Json chunk = internal::Head(state_->options, "chat.completion.chunk");
    chunk["choices"] = Json::array();
    chunk["usage"] = internal::UsageJson(usage);
    events.push_back(Sse(chunk));
  }
  events.emplace_back(internal::kSseDone);
  return events;
}

void ChatResponseBuilder::Add(const TokenPiece& piece) {
  if (state_->finished) return;
  if (state_->options.logprobs) internal::AppendChatLogprobs(state_->options, piece, state_->logprobs);
  state_->Accumulate(state_->Process(piece.text, false));
}

std::string ChatResponseBuilder::Body(FinishReason reason, const Usage& usage) {
  if (!state_->finished) {
    state_->Accumulate(state_->Process({}, true));
    state_->finished = true;
  }
  const Produced& total = state_->total;
  Json message;
  message["role"] = "assistant";
  message["content"] = total.content.empty() && !total.calls.empty() ? Json(nullptr) : Json(total.content);
  if (!total.calls.empty()) {
    Json calls = Json::array();
    for (const ParsedToolCall& call : total.calls) calls.push_back(ToolCallJson(call));
    message["tool_calls"] = std::move(calls);
  }
  if (!total.reasoning.empty()) message["reasoning_content"] = total.reasoning;
  Json choice;
  choice["index"] = 0;
  choice["message"] = std::move(message);
  choice["logprobs"] = state_->options.logprobs ? Json{{"content", state_->logprobs}} : Json(nullptr);
  choice["finish_reason"] = FinishReasonFor(reason, made_tool_calls());
  Json body = internal::Head(state_->options, "chat.completion");
  body["choices"] = Json::array({std::move(choice)});
  body["usage"] = internal::UsageJson(usage);
  return internal::Dump(body);
}

std::vector<std::string> StreamErrorEvents(const ApiError& error) {
  std::string event = "data: ";
  event += ErrorJson(error);
  event += "\n\n";
  return {std::move(event), std::string(internal::kSseDone)};
}

}  // namespace tandem::agent::openai
