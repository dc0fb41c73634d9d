// build/agent/serving_bench: what the agent's serving path costs (docs/performance.md, "Serving").
//
//   ServingOverhead/model/C   C concurrent requests (16-token prompts, 64 tokens each) straight
//                           into a unified engine's EngineLoop, alternating batch by batch with
//                           the same requests as streaming /v1/completions through router +
//                           prefill + decode agents (gRPC token stream, SSE), all in this process
//   Ttft4K/fp8_decode       a 4,096-token prompt, streamed, to its first SSE event: the standalone
//                           agent vs router + prefill (BF16 KV) + decode (BF16 or FP8 KV), alternating
// Counters, the same formulas on both sides (medians over the iterations): *_tok_s = every
// generated token over the batch's wall time, ratio = served / alone (Ttft4K: disaggregated /
// unified); *_req_decode_tok_s = the median request's (tokens - 1) / (end - first token); for the
// disaggregated TTFT the KV bytes on the wire and the transfer's page bytes per second.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "agent/agent.h"
#include "agent/engine_host.h"
#include "tests/agent/agent_test_util.h"

namespace tandem::agent {
namespace {

using Clock = std::chrono::steady_clock;
using testing::HttpCall;
constexpr int kMaxTokens = 64;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Run {
  Clock::time_point start;
  std::vector<Clock::time_point> first, end;
  std::vector<int> tokens;
  // Every generated token over the batch's wall time (submission to the last finish): robust to
  // how tokens are grouped into stream events.
  double TokS() const {
    const auto last_end = *std::max_element(end.begin(), end.end());
    double n = 0;
    for (int t : tokens) n += t;
    return n / std::max(1e-9, Seconds(last_end - start));
  }
  // The median request's time to its first token, in ms.
  double MedianTtftMs() const {
    std::vector<double> t;
    for (const auto& f : first) t.push_back(Seconds(f - start) * 1e3);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  // The median request's decode rate: (tokens - 1) / (its end - its first token).
  double MedianDecodeTokS() const {
    std::vector<double> rates;
    for (size_t i = 0; i < tokens.size(); ++i) {
      rates.push_back((tokens[i] - 1) / std::max(1e-9, Seconds(end[i] - first[i])));
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
  }
};

AgentConfig Config(Role role, const std::string& kv = "bf16") {
  AgentConfig c = testing::BaseConfig(role);
  c.model_path = role == Role::kRouter ? testing::TinyModelDir() : testing::ModelIn("bf16");
  c.kv_cache = *engine::ParseKvCacheDtype(kv);
  c.kv_cache_bytes = 256u << 20;
  c.prefix_cache = false;  // every iteration recomputes its prompt
  c.fault_injection = false;
  return c;
}

AgentConfig BenchConfig(Role role, const std::string& kv);

// range(0): 0 = the tiny model directory (a ~0.1 ms step: the worst case for per-token
// overhead), 1 = the `bench` preset (dummy weights, ~1 ms), 2 = `bench-wide` (several ms).
AgentConfig ModelConfigFor(int model, Role role, const std::string& kv = "bf16") {
  if (model == 0) return Config(role, kv);
  AgentConfig c = BenchConfig(role, kv);
  if (model == 2 && role != Role::kRouter) c.dummy_preset = "bench-wide";
  return c;
}

testing::Stack StartBenchStack(int model, const std::string& decode_kv) {
  testing::Stack s;
  auto p = Agent::Start(ModelConfigFor(model, Role::kPrefill));
  auto d = Agent::Start(ModelConfigFor(model, Role::kDecode, decode_kv));
  if (!p.ok() || !d.ok()) return s;
  AgentConfig rc = Config(Role::kRouter);
  if (model != 0) rc.model_path.clear();  // token-id prompts: no tokenizer needed
  rc.prefill_endpoints = {"127.0.0.1:" + std::to_string((*p)->grpc_port())};
  rc.decode_endpoints = {"127.0.0.1:" + std::to_string((*d)->grpc_port())};
  auto r = Agent::Start(rc);
  if (!r.ok()) return s;
  s.prefill = std::move(*p);
  s.decode = std::move(*d);
  s.router = std::move(*r);
  if (!testing::WaitReady(*s.prefill) || !testing::WaitReady(*s.decode) || !testing::WaitReady(*s.router)) {
    s.router.reset();
  }
  return s;
}

std::vector<int32_t> PromptTokens(int i) {
  std::vector<int32_t> prompt;
  for (int t = 0; t < 16; ++t) prompt.push_back(100 + (i * 7 + t) % 500);
  return prompt;
}

// One batch of n requests straight into the loop; false when a request was refused.
bool EngineBatch(EngineHost& host, int n, Run* run) {
  run->start = Clock::now();
  run->first.assign(n, {});
  run->end.assign(n, {});
  run->tokens.assign(n, 0);
  std::atomic<int> done{0};
  for (int i = 0; i < n; ++i) {
    engine::runtime::Request req;
    req.prompt = PromptTokens(i);
    req.params.max_tokens = kMaxTokens;
    req.params.temperature = 0;
    req.params.ignore_eos = true;
    auto sink = [run, &done, i](engine::runtime::RequestOutput out) {
      if (!out.new_tokens.empty() && run->tokens[i]++ == 0) run->first[i] = Clock::now();
      if (out.finish) {
        run->end[i] = Clock::now();
        done.fetch_add(1);
      }
    };
    if (!host.loop().Submit(req, sink).ok()) return false;
  }
  while (done.load() < n) std::this_thread::sleep_for(std::chrono::microseconds(200));
  return true;
}

// The same batch as streaming /v1/completions through the router; false when one did not complete.
bool RouterBatch(const Agent& router, int n, Run* run) {
  run->start = Clock::now();
  run->first.assign(n, {});
  run->end.assign(n, {});
  run->tokens.assign(n, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&router, run, i] {
      // The same prompt tokens as the engine-alone run; logprobs make every token an SSE event
      // even without a tokenizer (the `bench` presets have none).
      std::string ids;
      for (int32_t t : PromptTokens(i)) ids += (ids.empty() ? "" : ",") + std::to_string(t);
      const std::string body = "{\"model\":\"tiny\",\"prompt\":[" + ids +
                               "],\"max_tokens\":" + std::to_string(kMaxTokens) +
                               ",\"temperature\":0,\"ignore_eos\":true,\"stream\":true,\"logprobs\":0,"
                               "\"stream_options\":{\"include_usage\":true}}";
      // The first SSE event is the first token (the router answers once the prefill side made it).
      testing::StreamTimes t = testing::HttpStream(router.http_port(), "/v1/completions", body);
      run->first[i] = t.first_event;
      run->end[i] = t.end;
      run->tokens[i] = t.completion_tokens;
    });
  }
  for (std::thread& c : clients) c.join();
  for (int t : run->tokens) {
    if (t != kMaxTokens) return false;
  }
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The engine alone and the serving path, alternating batch by batch in one process so both see
// the same machine (this host's load drifts): medians over the iterations, and their ratio.
void ServingOverhead(benchmark::State& state) {
  const int model = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  auto host = EngineHost::Open(ModelConfigFor(model, Role::kStandalone));
  if (!host.ok()) return state.SkipWithError(host.status().ToString().c_str());
  testing::Stack s = StartBenchStack(model, "bf16");
  if (!s.router) return state.SkipWithError("the stack did not start");
  Run run;
  if (!EngineBatch(**host, n, &run) || !RouterBatch(*s.router, n, &run)) {  // warm-up
    return state.SkipWithError("a warm-up batch failed");
  }
  std::vector<double> alone, served, alone_decode, served_decode, alone_ttft, served_ttft;
  for (auto _ : state) {
    if (!EngineBatch(**host, n, &run)) return state.SkipWithError("submit failed");
    alone.push_back(run.TokS());
    alone_decode.push_back(run.MedianDecodeTokS());
    alone_ttft.push_back(run.MedianTtftMs());
    if (!RouterBatch(*s.router, n, &run)) return state.SkipWithError("a stream did not complete");
    served.push_back(run.TokS());
    served_decode.push_back(run.MedianDecodeTokS());
    served_ttft.push_back(run.MedianTtftMs());
  }
  state.counters["alone_tok_s"] = Median(alone);
  state.counters["served_tok_s"] = Median(served);
  state.counters["ratio"] = Median(served) / Median(alone);
  state.counters["alone_req_decode_tok_s"] = Median(alone_decode);
  state.counters["served_req_decode_tok_s"] = Median(served_decode);
  state.counters["alone_ttft_ms"] = Median(alone_ttft);
  state.counters["served_ttft_ms"] = Median(served_ttft);
}

// A streaming completion of `tokens` prompt tokens and two generated ones (so the disaggregated
// path transfers the KV); its first SSE event is the first token.
std::string PromptOf(int tokens) {
  std::string ids;
  for (int t = 0; t < tokens; ++t) ids += (t ? "," : "") + std::to_string(5 + (t * 37) % 1000);
  return "{\"model\":\"tiny\",\"prompt\":[" + ids +
         "],\"max_tokens\":2,\"temperature\":0,\"ignore_eos\":true,\"stream\":true,\"logprobs\":0,"
         "\"stream_options\":{\"include_usage\":true}}";
}

// The tiny model's 1,024-token context is too short for a 4K prompt: these use the `bench`
// preset (8,192 tokens of context, dummy weights, token-id prompts).
AgentConfig BenchConfig(Role role, const std::string& kv) {
  AgentConfig c = Config(role, kv);
  c.model_path.clear();
  c.dummy_preset = "bench";
  c.served_model_name = "tiny";
  c.kv_cache_bytes = 512u << 20;
  return c;
}

// TTFT of a 4K prompt: the standalone agent and router + prefill (BF16 KV) + decode (BF16 or FP8
// KV), alternating request by request; medians, their ratio, and the transfer's wire bytes and
// page bytes per second (the prefill member's export: conversion, protobuf, gRPC, WritePage).
void Ttft4K(benchmark::State& state) {
  auto unified = Agent::Start(BenchConfig(Role::kStandalone, "bf16"));
  if (!unified.ok()) return state.SkipWithError(unified.status().ToString().c_str());
  testing::Stack s = StartBenchStack(1, state.range(0) == 0 ? "bf16" : "fp8_e4m3");
  if (!s.router || !testing::WaitReady(**unified)) return state.SkipWithError("the agents did not start");
  const std::string body = PromptOf(4096);
  std::vector<double> alone, disaggregated;
  for (auto _ : state) {
    for (const Agent* a : {unified->get(), s.router.get()}) {
      const auto start = Clock::now();
      testing::StreamTimes t = testing::HttpStream(a->http_port(), "/v1/completions", body);
      if (t.completion_tokens != 2) return state.SkipWithError("a request did not complete");
      (a == s.router.get() ? disaggregated : alone).push_back(Seconds(t.first_event - start) * 1e3);
    }
  }
  const std::string pm = testing::Metrics(*s.prefill);
  const double bytes = testing::MetricValue(pm, "tandem_kv_transfer_bytes_total", "direction=\"out\"");
  const double seconds = testing::MetricValue(pm, "tandem_kv_transfer_seconds_sum");
  state.counters["unified_ttft_ms"] = Median(alone);
  state.counters["disaggregated_ttft_ms"] = Median(disaggregated);
  state.counters["ratio"] = Median(disaggregated) / Median(alone);
  state.counters["wire_bytes_per_request"] = bytes / static_cast<double>(state.iterations());
  state.counters["transfer_GB_s"] = bytes / std::max(1e-9, seconds) / 1e9;
}

BENCHMARK(ServingOverhead)
    ->ArgNames({"model", "concurrency"})
    ->ArgsProduct({{0, 1, 2}, {1, 32}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(7);
BENCHMARK(Ttft4K)->ArgName("fp8_decode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace tandem::agent

BENCHMARK_MAIN();
