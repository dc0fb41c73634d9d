#pragma once
// The load generator behind `tandem bench serve` and `integrity`: streamed OpenAI completions
// (POST /v1/completions, "stream": true) over plain HTTP/1.1, one connection per request, timed
// at every server-sent event; closed-loop concurrency or open-loop Poisson arrivals; and the
// figures `vllm bench serve` reports, under the same names.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tools/http_client.h"

namespace tandem::tools::bench {

// One streamed completion as the client saw it. Times are seconds from the request's send.
struct RequestResult {
  bool ok = false;
  std::string error;        // HTTP status and body, or the transport error
  double start_s = 0;       // from the run's start
  double ttft_s = 0;        // first event carrying text
  double e2e_s = 0;         // the last byte
  std::vector<double> itl;  // gaps between successive text-carrying events
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // usage.completion_tokens when the server sends it, else events
};

struct LoadSpec {
  int prompt_tokens = 128;
  int output_tokens = 32;
  double input_spread = 0;  // lengths uniform in [n (1 - spread), n (1 + spread)]
  double output_spread = 0;
  int num_requests = 16;
  int concurrency = 1;  // closed loop: this many requests in flight
  double rate = 0;      // > 0: open loop, Poisson arrivals at this many requests/s (no cap)
  uint64_t seed = 1;
  std::string model;
  int max_token_id = 1000;  // prompts are random ids in [10, max_token_id): valid in any vocabulary
  double timeout_s = 600;
};

// Streams one completion of `prompt` (token ids). Never throws; errors are in the result.
RequestResult StreamCompletion(const Endpoint& endpoint, const std::string& model,
                               const std::vector<int>& prompt, int max_tokens, double timeout_s);

// Runs the load; returns every request's result and the run's wall time.
struct LoadRun {
  std::vector<RequestResult> requests;
  double duration_s = 0;
};
LoadRun RunLoad(const Endpoint& endpoint, const LoadSpec& spec);

struct Slo {
  double ttft_s = 0, itl_s = 0, e2e_s = 0;  // 0: not used
};

// vLLM's names: completed, failed, duration, total_input_tokens, total_output_tokens,
// request_throughput, output_throughput, total_token_throughput, {mean,median,std,p50,p95,p99}_
// {ttft,tpot,itl,e2el}_ms, request_goodput (requests/s meeting every SLO given).
nlohmann::json Summarize(const LoadRun& run, const Slo& slo);

}  // namespace tandem::tools::bench
