// Sampler::Sample cost per token (Google Benchmark) on Kimi K2's 163,840 and GLM's 151,552-entry
// vocabularies: greedy, plain temperature, top-k 50, top-p 0.9, top-p 0.9 with 5 logprobs, and
// top-k 50 with repetition/frequency penalties over a 2,000-token prompt.
//
// Logits are N(0, 2) ("flat": the nucleus of top-p 0.9 is tens of thousands of tokens, the worst
// case for the partial sort) or the same plus +12 on 8 tokens ("peaked", a confident model).
//
// BM_RowSum and BM_RowExp calibrate: one pass over the row, one expf per entry.
//
//   build/engine/sampler_bench --benchmark_min_time=0.2s
#include <cmath>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/runtime/sampler.h"

namespace tandem::engine::runtime {
namespace {

enum Mode : int64_t { kGreedy, kTemperature, kTopK, kTopP, kTopPLogprobs, kTopKPenalties };

std::vector<float> Logits(int64_t vocab, bool peaked) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0, 2);
  for (float& v : logits) v = normal(rng);
  if (peaked) {
    for (int i = 0; i < 8; ++i) logits[rng() % logits.size()] += 12;
  }
  return logits;
}

void BM_Sample(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const auto mode = static_cast<Mode>(state.range(1));
  const bool peaked = state.range(2) != 0;
  const std::vector<float> logits = Logits(vocab, peaked);
  SamplingParams p;
  std::vector<int32_t> prompt;
  switch (mode) {
    case kGreedy: p.temperature = 0; break;
    case kTemperature: p.temperature = 0.8f; break;
    case kTopK: p.top_k = 50; break;
    case kTopP: p.top_p = 0.9f; break;
    case kTopPLogprobs: p.top_p = 0.9f, p.logprobs = 5; break;
    case kTopKPenalties:
      p.top_k = 50, p.repetition_penalty = 1.1f, p.frequency_penalty = 0.3f, p.presence_penalty = 0.2f;
      for (int i = 0; i < 2000; ++i) prompt.push_back(static_cast<int32_t>((i * 7919) % vocab));
      break;
  }
  StatusOr<Sampler> sampler = Sampler::Create(p, vocab, 1);
  if (!sampler.ok()) {
    state.SkipWithError(sampler.status().ToString().c_str());
    return;
  }
  std::vector<int32_t> output;
  for (auto _ : state) {
    StatusOr<SampleResult> r = sampler->Sample(logits, prompt, output);
    benchmark::DoNotOptimize(r);
    if (output.size() < 256) output.push_back(r->token);  // penalties see a growing output
  }
  state.SetItemsProcessed(state.iterations());
}

// Calibration on a shared machine: one plain pass over the row (a sum), and one expf per entry
// (the floor of any sampler that normalises the full distribution).
void BM_RowSum(benchmark::State& state) {
  const std::vector<float> logits = Logits(state.range(0), false);
  for (auto _ : state) {
    float sum = 0;
    for (float v : logits) sum += v;
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_RowSum)->Arg(163840)->Unit(benchmark::kMicrosecond);

void BM_RowExp(benchmark::State& state) {
  const std::vector<float> logits = Logits(state.range(0), false);
  for (auto _ : state) {
    double sum = 0;
    for (float v : logits) sum += std::exp(v);
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_RowExp)->Arg(163840)->Unit(benchmark::kMicrosecond);

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t vocab : {163840, 151552}) {
    for (int64_t mode : {kGreedy, kTemperature, kTopK, kTopP, kTopPLogprobs, kTopKPenalties})
      b->Args({vocab, mode, 0});
    b->Args({vocab, kTopP, 1});
  }
  b->ArgNames({"vocab", "mode", "peaked"});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Sample)->Apply(Args);

}  // namespace
}  // namespace tandem::engine::runtime

BENCHMARK_MAIN();
