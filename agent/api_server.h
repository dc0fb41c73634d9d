#pragma once
// The OpenAI-compatible HTTP API of the router and standalone roles:
//   GET  /v1/models
//   POST /v1/chat/completions   (messages, tools, streaming SSE, usage, logprobs, sampling knobs)
//   POST /v1/completions
// Requests are authenticated by API key (Authorization: Bearer KEY) when keys are configured;
// the key's tenant, never anything in the body, salts prefix-cache sharing. Errors use OpenAI's
// JSON shape: 400 (bad body, named field), 401, 404 (unknown model or path), 405, 413 (the HTTP
// server), 429 with Retry-After (no slot: the tenant's queue is full or its wait timed out, see
// admission.h; or no pages), 503 (no ready pool, draining).
// A client that goes away cancels its request (GenerationStream::Cancel) within one poll (20 ms).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/admission.h"
#include "agent/config.h"
#include "agent/generation.h"
#include "agent/http/http_server.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/openai/api.h"
#include "agent/openai/response.h"
#include "engine/text/chat_types.h"

namespace tandem::engine::text {
class Tokenizer;
}

namespace tandem::agent {

struct ApiServerOptions {
  std::string model_name;  // what /v1/models lists and requests must name
  engine::text::ChatFamily family = engine::text::ChatFamily::kKimiK2;
  const engine::text::Tokenizer* tokenizer = nullptr;  // nullptr: only token-id completions work
  int64_t max_context_tokens = 0;                      // prompt + max_tokens must fit (0: unchecked)
  int32_t default_max_tokens = 256;
  uint64_t max_inflight = 256;               // admission.max_inflight is set from it
  AdmissionOptions admission;                // per-tenant caps, queues and weights (admission.h)
  std::vector<ApiKey> api_keys;              // empty: no authentication, tenant "default"
  bool fault_injection = false;              // honour x-tandem-fault (tests only)
  bool forward_unknown_tool_calls = false;   // api.unknownToolCalls: forward (default: drop)
  bool count_finished = false;               // the router counts finishes itself (no engine to count them)
  GenerationBackend* backend = nullptr;      // not owned
  metrics::AgentMetrics* metrics = nullptr;  // not owned
  std::function<bool()> admitting = [] { return true; };  // false while draining: 503
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  // The HTTP handler (http::HttpServer calls it on a connection thread).
  void Handle(const http::HttpRequest& request, http::ResponseWriter& writer);

 private:
  void Chat(const http::HttpRequest& request, const std::string& tenant, http::ResponseWriter& writer);
  void Completions(const http::HttpRequest& request, const std::string& tenant, http::ResponseWriter& writer);
  // True when `model` is the one served; else answers 404 (model_not_found).
  bool ServesModel(const std::string& model, http::ResponseWriter& writer);
  // Fills in what every call carries (the tenant, the test-only fault header, the client-gone
  // check), then admission, then the backend; nullptr after answering with an error.
  std::unique_ptr<GenerationStream> StartOrAnswer(GenerateCall& call, const http::HttpRequest& request,
                                                  const std::string& tenant, http::ResponseWriter& writer);
  // The response options both endpoints share: id, model, created, family, tokenizer.
  openai::ResponseOptions ResponseOptionsFor(const GenerateCall& call) const;
  std::string NewId(std::string_view prefix);

  ApiServerOptions options_;
  std::unique_ptr<Admission> admission_;

 public:
  const Admission& admission() const { return *admission_; }
};

// Sends OpenAI's error body with `error.status`.
void SendError(http::ResponseWriter& writer, const openai::ApiError& error,
               const http::HeaderList& extra = {});
// The ApiError a backend or engine Status maps to.
openai::ApiError ErrorFor(const Status& status);

}  // namespace tandem::agent
