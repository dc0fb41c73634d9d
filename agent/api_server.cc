#include "agent/api_server.h"

#include <chrono>
#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "agent/openai/response.h"
#include "common/logging.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"

namespace tandem::agent {

namespace runtime = engine::runtime;
using openai::ApiError;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kPollMs = 20;

ApiError Error(int status, std::string type, std::string message, std::string param = "",
               std::string code = "") {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Drives one request's stream into the response: SSE events as pieces come, or one body at the end.
template <typename Builder>
void Serve(GenerationStream& stream, Builder& builder, bool streaming, int64_t prompt_tokens,
           Clock::time_point received, http::ResponseWriter& writer, const ApiServerOptions& options) {
  metrics::AgentMetrics* m = options.metrics;
  openai::Usage usage;
  usage.prompt_tokens = prompt_tokens;
  bool first_token = true;
  Clock::time_point last_token = received;
  if (streaming && !writer.BeginStream(200, "text/event-stream")) {
    stream.Cancel();
  }
  for (;;) {
    StatusOr<std::optional<StreamEvent>> next = stream.Next(kPollMs);
    if (!next.ok()) {
      TANDEM_LOG(Warning) << "request failed mid-stream: " << next.status().ToString();
      if (options.count_finished && m) m->CountFinished(runtime::FinishReason::kAbort);
      if (streaming) {
        for (const std::string& e : openai::StreamErrorEvents(ErrorFor(next.status()))) writer.WriteChunk(e);
        writer.EndStream();
      } else {
        SendError(writer, ErrorFor(next.status()));
      }
      return;
    }
    if (!next->has_value()) {
      if (writer.ClientGone()) stream.Cancel();  // the finish (cancelled) follows
      continue;
    }
    StreamEvent& event = **next;
    if (!event.piece.tokens.empty()) {
      const Clock::time_point now = Clock::now();
      if (m) {
        if (first_token) {
          m->ObserveTimeToFirstToken(Seconds(now - received));
        } else {
          m->ObserveInterTokenLatency(Seconds(now - last_token) /
                                      static_cast<double>(event.piece.tokens.size()));
        }
      }
      first_token = false;
      last_token = now;
      usage.completion_tokens += static_cast<int64_t>(event.piece.tokens.size());
    }
    if (streaming) {
      std::string events;
      for (const std::string& e : builder.StreamPiece(event.piece)) events += e;
      if (!events.empty() && !writer.WriteChunk(events)) stream.Cancel();
    } else {
      builder.Add(event.piece);
    }
    if (!event.finish) continue;
    usage.cached_tokens = stream.cached_tokens();
    if (m) m->ObserveE2eLatency(Seconds(Clock::now() - received));
    if (options.count_finished && m) m->CountFinished(*event.finish);
    const bool aborted = *event.finish == runtime::FinishReason::kAbort;
    const ApiError abort_error =
        Error(500, "server_error", "the request was aborted: " + event.finish_detail);
    if (streaming) {
      std::vector<std::string> tail = builder.StreamFinish(*event.finish, usage);
      if (aborted && !tail.empty()) {
        // The finish_reason chunk says "abort"; an error event before [DONE] says why.
        std::vector<std::string> error = openai::StreamErrorEvents(abort_error);
        tail.insert(tail.end() - 1, error.front());
      }
      for (const std::string& e : tail) writer.WriteChunk(e);
      writer.EndStream();
    } else if (aborted) {
      SendError(writer, abort_error);
    } else {
      writer.Send(200, "application/json", builder.Body(*event.finish, usage));
    }
    return;
  }
}

}  // namespace

void SendError(http::ResponseWriter& writer, const ApiError& error, const http::HeaderList& extra) {
  writer.Send(error.status, "application/json", openai::ErrorJson(error), extra);
}

ApiError ErrorFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return Error(400, "invalid_request_error", status.message());
    case StatusCode::kResourceExhausted: return Error(429, "rate_limit_error", status.message());
    case StatusCode::kUnavailable: return Error(503, "server_error", status.message());
    case StatusCode::kCancelled: return Error(499, "invalid_request_error", "the request was cancelled");
    default: return Error(500, "server_error", status.ToString());
  }
}

namespace {
// The backend's stream, holding its admission slot until the request is over.
class AdmittedStream final : public GenerationStream {
 public:
  AdmittedStream(std::unique_ptr<GenerationStream> inner, Admission::Ticket ticket)
      : inner_(std::move(inner)), ticket_(std::move(ticket)) {}
  StatusOr<std::optional<StreamEvent>> Next(int64_t timeout_ms) override { return inner_->Next(timeout_ms); }
  void Cancel() override { inner_->Cancel(); }
  int64_t cached_tokens() const override { return inner_->cached_tokens(); }

 private:
  std::unique_ptr<GenerationStream> inner_;
  Admission::Ticket ticket_;  // released after inner_ is gone (members die in reverse order)
};
}  // namespace

ApiServer::ApiServer(ApiServerOptions options) : options_(std::move(options)) {
  options_.admission.max_inflight = static_cast<int64_t>(options_.max_inflight);
  admission_ = std::make_unique<Admission>(options_.admission);
}

std::string ApiServer::NewId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + hex;
}

void ApiServer::Handle(const http::HttpRequest& request, http::ResponseWriter& writer) {
  const std::string& path = request.path;
  if (path.rfind("/v1/", 0) != 0) {
    SendError(writer, Error(404, "invalid_request_error", "no route for " + path, "", "not_found"));
    return;
  }
  std::string tenant = "default";
  if (!options_.api_keys.empty()) {
    std::string_view auth = request.Header("authorization");
    constexpr std::string_view kBearer = "Bearer ";
    const ApiKey* found = nullptr;
    if (auth.substr(0, kBearer.size()) == kBearer)
      found = FindApiKey(options_.api_keys, auth.substr(kBearer.size()));
    if (found == nullptr) {
      SendError(writer,
                Error(401, "authentication_error",
                      auth.empty() ? "missing API key (Authorization: Bearer KEY)" : "invalid API key", "",
                      "invalid_api_key"));
      return;
    }
    tenant = found->tenant;
  }
  const bool get = request.method == "GET", post = request.method == "POST";
  if (path == "/v1/models" && get) {
    nlohmann::json body = {{"object", "list"},
                           {"data",
                            {{{"id", options_.model_name},
                              {"object", "model"},
                              {"created", 0},
                              {"owned_by", "tandem"},
                              {"max_model_len", options_.max_context_tokens}}}}};
    writer.Send(200, "application/json", body.dump());
    return;
  }
  if ((path == "/v1/chat/completions" || path == "/v1/completions") && !post) {
    SendError(writer, Error(405, "invalid_request_error", request.method + " is not allowed on " + path),
              {{"Allow", "POST"}});
    return;
  }
  if (path == "/v1/chat/completions") return Chat(request, tenant, writer);
  if (path == "/v1/completions") return Completions(request, tenant, writer);
  SendError(writer, Error(404, "invalid_request_error", "no route for " + path, "", "not_found"));
}

bool ApiServer::ServesModel(const std::string& model, http::ResponseWriter& writer) {
  if (model == options_.model_name) return true;
  SendError(writer, Error(404, "invalid_request_error",
                          "the model '" + model + "' does not exist (this server serves '" +
                              options_.model_name + "')",
                          "model", "model_not_found"));
  return false;
}

openai::ResponseOptions ApiServer::ResponseOptionsFor(const GenerateCall& call) const {
  openai::ResponseOptions ro;
  ro.id = call.request_id;
  ro.model = options_.model_name;
  ro.created = static_cast<int64_t>(std::time(nullptr));
  ro.family = options_.family;
  ro.tokenizer = options_.tokenizer;
  return ro;
}

std::unique_ptr<GenerationStream> ApiServer::StartOrAnswer(GenerateCall& call,
                                                           const http::HttpRequest& request,
                                                           const std::string& tenant,
                                                           http::ResponseWriter& writer) {
  call.tenant = tenant;
  if (options_.fault_injection) call.fault = std::string(request.Header("x-tandem-fault"));
  call.cancelled = [&writer] { return writer.ClientGone(); };
  if (!options_.admitting()) {
    SendError(writer, Error(503, "server_error", "the server is shutting down"));
    return nullptr;
  }
  if (options_.max_context_tokens > 0 &&
      static_cast<int64_t>(call.prompt.size()) + call.params.max_tokens > options_.max_context_tokens) {
    SendError(writer,
              Error(400, "invalid_request_error",
                    "the prompt (" + std::to_string(call.prompt.size()) + " tokens) plus max_tokens (" +
                        std::to_string(call.params.max_tokens) + ") exceed the model's context of " +
                        std::to_string(options_.max_context_tokens) + " tokens",
                    "max_tokens", "context_length_exceeded"));
    return nullptr;
  }
  StatusOr<Admission::Ticket> ticket = admission_->Acquire(tenant, call.cancelled);
  if (!ticket.ok()) {
    if (ticket.status().code() == StatusCode::kResourceExhausted) {
      SendError(writer, Error(429, "rate_limit_error", ticket.status().message()), {{"Retry-After", "1"}});
    } else {
      SendError(writer, ErrorFor(ticket.status()));  // the client left while it waited
    }
    return nullptr;
  }
  StatusOr<std::unique_ptr<GenerationStream>> stream = options_.backend->Start(call);
  if (!stream.ok()) {
    ApiError e = ErrorFor(stream.status());
    http::HeaderList extra;
    if (e.status == 429) extra.push_back({"Retry-After", "1"});
    if (options_.count_finished && options_.metrics) {
      options_.metrics->CountFinished(stream.status().code() == StatusCode::kCancelled
                                          ? runtime::FinishReason::kCancelled
                                          : runtime::FinishReason::kAbort);
    }
    SendError(writer, e, extra);
    return nullptr;
  }
  return std::make_unique<AdmittedStream>(std::move(*stream), std::move(*ticket));
}

void ApiServer::Chat(const http::HttpRequest& request, const std::string& tenant,
                     http::ResponseWriter& writer) {
  const Clock::time_point received = Clock::now();
  openai::ParseOptions parse;
  parse.default_max_tokens = options_.default_max_tokens;
  auto parsed = openai::ParseChatCompletionRequest(request.body, parse);
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(writer, *e);
  openai::ChatCompletionRequest& chat = std::get<openai::ChatCompletionRequest>(parsed);
  if (!ServesModel(chat.model, writer)) return;
  if (options_.tokenizer == nullptr) {
    return SendError(writer,
                     Error(400, "invalid_request_error", "this model has no tokenizer: chat is unavailable"));
  }
  const bool tools_enabled = !chat.chat.tools_json.empty() && chat.tool_choice != openai::ToolChoice::kNone;
  std::vector<std::string> tools = chat.chat.tools_json;
  if (!tools_enabled) chat.chat.tools_json.clear();
  StatusOr<std::string> prompt = engine::text::RenderChat(options_.family, chat.chat);
  if (!prompt.ok())
    return SendError(writer, Error(400, "invalid_request_error", prompt.status().message(), "messages"));

  GenerateCall call;
  call.request_id = NewId("chatcmpl-");
  call.prompt = options_.tokenizer->Encode(*prompt);
  call.params = chat.params;
  // Kimi K2's tool-call markers are special tokens: with tools on, they must reach the parser
  // (vLLM's tool parsers turn skip_special_tokens off the same way). The parser takes them out.
  if (tools_enabled) call.params.skip_special_tokens = false;
  std::unique_ptr<GenerationStream> stream = StartOrAnswer(call, request, tenant, writer);
  if (!stream) return;

  openai::ResponseOptions ro = ResponseOptionsFor(call);
  ro.tools_json = tools;
  ro.tool_names = chat.tool_names;
  ro.tools_enabled = tools_enabled;
  ro.forward_unknown_tool_calls = options_.forward_unknown_tool_calls;
  ro.reasoning = options_.family == engine::text::ChatFamily::kGlm;
  ro.logprobs = chat.logprobs;
  ro.top_logprobs = chat.params.logprobs < 0 ? 0 : chat.params.logprobs;
  ro.include_usage = chat.include_usage;
  StatusOr<std::unique_ptr<openai::ChatResponseBuilder>> builder = openai::ChatResponseBuilder::Create(ro);
  if (!builder.ok()) {
    stream->Cancel();
    return SendError(writer, Error(400, "invalid_request_error", builder.status().message(), "tools"));
  }
  Serve(*stream, **builder, chat.stream, static_cast<int64_t>(call.prompt.size()), received, writer,
        options_);
  if (const int dropped = (*builder)->dropped_tool_calls(); dropped > 0) {
    // The count and the request, never the call (it is the model's text).
    TANDEM_LOG(Warning) << call.request_id << ": " << dropped
                        << " tool call(s) naming a function the request did not offer were dropped";
    if (options_.metrics != nullptr) options_.metrics->CountDroppedToolCalls(dropped);
  }
}

void ApiServer::Completions(const http::HttpRequest& request, const std::string& tenant,
                            http::ResponseWriter& writer) {
  const Clock::time_point received = Clock::now();
  openai::ParseOptions parse;
  parse.default_max_tokens = options_.default_max_tokens;
  auto parsed = openai::ParseCompletionRequest(request.body, parse);
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(writer, *e);
  openai::CompletionRequest& req = std::get<openai::CompletionRequest>(parsed);
  if (!ServesModel(req.model, writer)) return;
  GenerateCall call;
  call.request_id = NewId("cmpl-");
  std::string echo_text;
  if (req.prompt_is_tokens) {
    call.prompt = req.prompt_tokens;
    if (req.echo && options_.tokenizer != nullptr) {
      StatusOr<std::string> text = options_.tokenizer->DecodeBytes(call.prompt);
      if (text.ok()) echo_text = *text;
    }
  } else {
    if (options_.tokenizer == nullptr) {
      return SendError(writer, Error(400, "invalid_request_error",
                                     "this model has no tokenizer: send the prompt as token ids", "prompt"));
    }
    call.prompt = options_.tokenizer->Encode(req.prompt_text);
    echo_text = req.prompt_text;
  }
  if (call.prompt.empty())
    return SendError(writer, Error(400, "invalid_request_error", "the prompt is empty", "prompt"));
  call.params = req.params;
  std::unique_ptr<GenerationStream> stream = StartOrAnswer(call, request, tenant, writer);
  if (!stream) return;
  openai::ResponseOptions ro = ResponseOptionsFor(call);
  ro.logprobs = req.params.logprobs >= 0;
  ro.top_logprobs = req.params.logprobs < 0 ? 0 : req.params.logprobs;
  ro.include_usage = req.include_usage;
  openai::CompletionResponseBuilder builder(ro);
  if (req.echo) builder.SetEcho(echo_text);
  Serve(*stream, builder, req.stream, static_cast<int64_t>(call.prompt.size()), received, writer, options_);
}

}  // namespace tandem::agent
