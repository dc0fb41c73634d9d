#include "agent/openai/api.h"

#include <exception>
#include <limits>

#include "agent/openai/chat_fields.h"
#include "agent/openai/json_fields.h"

namespace tandem::agent::openai {

using internal::BadRequest;
using internal::FieldReader;
using internal::Json;
using internal::Range;

std::string ErrorJson(const ApiError& error) {
  Json inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? Json(nullptr) : Json(error.param);
  inner["code"] = error.code.empty() ? Json(nullptr) : Json(error.code);
  Json out;
  out["error"] = std::move(inner);
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace internal {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

void ReadStop(FieldReader& reader, std::vector<std::string>* stop) {
  const Json* v = reader.Find("stop");
  if (v == nullptr || !reader.ok()) return;
  const std::string kBad = "'stop' must be a non-empty string or an array of up to 4 non-empty strings";
  if (v->is_string()) {
    if (v->get_ref<const std::string&>().empty()) return reader.Fail("stop", kBad);
    stop->push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array() || v->size() > 4) return reader.Fail("stop", kBad);
  for (const Json& s : *v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty()) return reader.Fail("stop", kBad);
    stop->push_back(s.get<std::string>());
  }
}

void ReadStopTokenIds(FieldReader& reader, std::vector<int32_t>* ids) {
  const Json* v = reader.Array("stop_token_ids");
  if (v == nullptr) return;
  for (const Json& id : *v) {
    int64_t i = 0;
    if (!AsInt(id, 0, kInt32Max, &i)) {
      return reader.Fail("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    }
    ids->push_back(static_cast<int32_t>(i));
  }
}

void ReadSeed(FieldReader& reader, std::optional<uint64_t>* seed) {
  const Json* v = reader.Find("seed");
  if (v == nullptr || !reader.ok()) return;
  if (v->is_number_unsigned()) {
    *seed = v->get<uint64_t>();
  } else if (v->is_number_integer()) {
    // OpenAI allows negative seeds; any 64-bit pattern is as good a seed as another.
    *seed = static_cast<uint64_t>(v->get<int64_t>());
  } else {
    reader.Fail("seed", "'seed' must be an integer");
  }
}

}  // namespace

void ReadSampling(FieldReader& reader, const ParseOptions& options, engine::runtime::SamplingParams* params) {
  reader.Number("temperature", Range{0, 2}, &params->temperature);
  reader.Number("top_p", Range{0, 1, /*lo_open=*/true}, &params->top_p);
  if (reader.Int("top_k", -1, kInt32Max, &params->top_k) && params->top_k == -1) params->top_k = 0;
  reader.Number("min_p", Range{0, 1}, &params->min_p);
  reader.Number("repetition_penalty", Range{0, 2, /*lo_open=*/true}, &params->repetition_penalty);
  reader.Number("frequency_penalty", Range{-2, 2}, &params->frequency_penalty);
  reader.Number("presence_penalty", Range{-2, 2}, &params->presence_penalty);
  ReadSeed(reader, &params->seed);
  ReadStop(reader, &params->stop);
  ReadStopTokenIds(reader, &params->stop_token_ids);
  params->max_tokens = options.default_max_tokens;
  reader.Int("max_tokens", 1, options.max_max_tokens, &params->max_tokens);
  reader.Int("max_completion_tokens", 1, options.max_max_tokens, &params->max_tokens);
  if (reader.Int("min_tokens", 0, options.max_max_tokens, &params->min_tokens) &&
      params->min_tokens > params->max_tokens) {
    reader.Fail("min_tokens", "'min_tokens' must not exceed the maximum number of tokens");
  }
  reader.Bool("ignore_eos", &params->ignore_eos);
  reader.Bool("skip_special_tokens", &params->skip_special_tokens);
  if (const Json* n = reader.ok() ? reader.Find("n") : nullptr) {
    int64_t value = 0;
    if (!AsInt(*n, 1, 1, &value)) reader.Fail("n", "'n' must be 1: only one choice per request is supported");
  }
}

}  // namespace internal

namespace {

// stream and stream_options.include_usage (which only means something when streaming).
void ReadStream(FieldReader& reader, bool* stream, bool* include_usage) {
  reader.Bool("stream", stream);
  const Json* options = reader.Object("stream_options");
  if (options == nullptr) return;
  FieldReader r(*options, "stream_options.");
  bool usage = false;
  r.Bool("include_usage", &usage);
  reader.Adopt(r);
  *include_usage = *stream && usage;
}

std::optional<ApiError> ReadChatExtras(FieldReader& reader, ChatCompletionRequest* out) {
  reader.Bool("logprobs", &out->logprobs);
  int32_t top_logprobs = 0;
  if (reader.Int("top_logprobs", 0, 20, &top_logprobs) && top_logprobs > 0 && !out->logprobs) {
    reader.Fail("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
  }
  out->params.logprobs = out->logprobs ? top_logprobs : -1;
  if (const Json* kwargs = reader.Object("chat_template_kwargs")) {
    FieldReader r(*kwargs, "chat_template_kwargs.");
    bool enable_thinking = true;
    if (r.Bool("enable_thinking", &enable_thinking)) out->chat.enable_thinking = enable_thinking;
    reader.Adopt(r);
  }
  if (!reader.ok()) return reader.error();
  return std::nullopt;
}

std::variant<ChatCompletionRequest, ApiError> ParseChat(const Json& body, const ParseOptions& options) {
  ChatCompletionRequest out;
  FieldReader reader(body, "");
  reader.RequiredString("model", &out.model);
  if (!reader.ok()) return reader.error();
  if (auto error = internal::ParseMessages(body, &out.chat.messages)) return *error;
  if (auto error = internal::ParseTools(body, &out)) return *error;
  internal::ReadSampling(reader, options, &out.params);
  ReadStream(reader, &out.stream, &out.include_usage);
  if (auto error = ReadChatExtras(reader, &out)) return *error;
  return out;
}

// prompt: a string, an array of token ids, or an array holding one of those.
void ReadPrompt(FieldReader& reader, CompletionRequest* out) {
  const Json* v = reader.Find("prompt");
  if (v == nullptr) return reader.Fail("prompt", "'prompt' is required");
  const std::string kBad = "'prompt' must be a string or an array of token ids";
  if (v->is_array() && v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) v = &(*v)[0];
  if (v->is_string()) {
    out->prompt_text = v->get<std::string>();
    if (out->prompt_text.empty()) reader.Fail("prompt", "'prompt' must not be empty");
    return;
  }
  if (!v->is_array()) return reader.Fail("prompt", kBad);
  if (v->empty()) return reader.Fail("prompt", "'prompt' must not be empty");
  out->prompt_is_tokens = true;
  for (const Json& token : *v) {
    int64_t id = 0;
    if (token.is_string() || token.is_array()) {
      return reader.Fail("prompt", "'prompt' holds more than one prompt: only one is supported");
    }
    if (!internal::AsInt(token, 0, std::numeric_limits<int32_t>::max(), &id))
      return reader.Fail("prompt", kBad);
    out->prompt_tokens.push_back(static_cast<int32_t>(id));
  }
}

std::variant<CompletionRequest, ApiError> ParseCompletion(const Json& body, const ParseOptions& options) {
  CompletionRequest out;
  FieldReader reader(body, "");
  reader.RequiredString("model", &out.model);
  ReadPrompt(reader, &out);
  internal::ReadSampling(reader, options, &out.params);
  ReadStream(reader, &out.stream, &out.include_usage);
  reader.Bool("echo", &out.echo);
  reader.Int("logprobs", 0, 5, &out.params.logprobs);
  if (!reader.ok()) return reader.error();
  return out;
}

// Parses `body` and hands the object to `parse`; the one place that catches what nlohmann throws.
template <typename T, typename Parse>
std::variant<T, ApiError> ParseRequest(std::string_view body, const ParseOptions& options, Parse parse) {
  try {
    std::variant<Json, ApiError> json = internal::ParseBody(body, options.max_json_depth);
    if (auto* error = std::get_if<ApiError>(&json)) return *error;
    const Json& object = std::get<Json>(json);
    if (!object.is_object()) return BadRequest("the request body must be a JSON object");
    return parse(object, options);
  } catch (const std::exception& e) {
    return BadRequest(std::string("invalid request: ") + e.what());
  }
}

}  // namespace

std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(std::string_view body,
                                                                         const ParseOptions& options) {
  return ParseRequest<ChatCompletionRequest>(body, options, ParseChat);
}

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body,
                                                                 const ParseOptions& options) {
  return ParseRequest<CompletionRequest>(body, options, ParseCompletion);
}

}  // namespace tandem::agent::openai
