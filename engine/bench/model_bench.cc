// Model runtime benchmarks (Google Benchmark) on the `bench` preset (dummy weights, seed 1):
//   decode/<weights>/kv:<kv>/batch:B/threads:T  one decode step of B sequences, each with 512
//       tokens already in the cache (filled directly in the pages; the context is reset to 512
//       before every step so every step reads the same 513 rows);
//       Each step feeds another token id, so the routed experts change from step to step.
//   decode/.../batch:1/threads:T/cold            the same with every cache evicted before each
//       step (untimed): the weights come from DRAM, like the read-bandwidth probe's.
//   decode/.../batch:B/threads:T/integrity       the same step preceded by the KV integrity check
//       the engine runs before every step (TagTracker::VerifyBatch over every page of the batch):
//       its cost is the ratio to the plain row.
//   prefill/<weights>/kv:<kv>/threads:T         one 512-token prompt from an empty cache.
//   .../cold/isa:<isa>                          the cold row once per SIMD variant the host runs
//       (engine/core/cpu_features.h's ceiling set for that row): an AVX-512 host measures its
//       AVX2 kernels in the same run. Every row's label names the variants that ran.
//   TANDEM_ISA=avx2 build/engine/model_bench     every row under that ceiling (no wider isa: rows).
// Counters: tok/s; at batch 1 also bytes/token (weights actually streamed for one token: the
// attention Linears, the dense MLP or the shared expert, the router and num_experts_per_tok
// routed experts per layer, lm_head, plus the 513 KV rows of every layer) and bw_frac, that
// rate over engine/bench/read_bandwidth.h's probe.
//
//   build/engine/model_bench [--benchmark_filter=decode/int4] [--benchmark_repetitions=3]
//   MODEL_BENCH_PRESET=bench-wide build/engine/model_bench   (another preset)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/logging.h"
#include "engine/bench/read_bandwidth.h"
#include "engine/core/cpu_features.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/page_pool.h"
#include "engine/model/dummy_model.h"
#include "engine/model/forward.h"
#include "engine/model/kv_shape.h"
#include "engine/model/model_stats.h"
#include "engine/model/presets.h"
#include "engine/model/tensor_parallel.h"
#include "engine/runtime/serving_engine.h"

namespace tandem::engine::model {
namespace {

constexpr int64_t kContext = 512;  // tokens cached before each decode step; prefill prompt length
constexpr int64_t kPageTokens = 64;
constexpr WeightFormat kFormats[] = {WeightFormat::kBf16, WeightFormat::kFp8Block128,
                                     WeightFormat::kInt4Group32};
constexpr KvCacheDtype kKvDtypes[] = {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3};

const char* FormatName(WeightFormat f) {
  return f == WeightFormat::kBf16 ? "bf16" : f == WeightFormat::kFp8Block128 ? "fp8" : "int4";
}
const char* KvName(KvCacheDtype d) { return d == KvCacheDtype::kBf16 ? "bf16" : "fp8"; }

std::string PresetName() {
  const char* env = std::getenv("MODEL_BENCH_PRESET");
  return env != nullptr && *env != '\0' ? env : "bench";
}

// One model in memory at a time (benchmarks run grouped by format): the run stays within a few
// hundred MB whatever the preset.
const ModelWeights& Model(WeightFormat f) {
  static std::unique_ptr<ModelWeights> held;
  static WeightFormat held_format;
  if (held == nullptr || held_format != f) {
    held.reset();
    StatusOr<ModelConfig> c = Preset(PresetName());
    TANDEM_CHECK(c.ok());
    StatusOr<ModelWeights> w = MakeDummyModel(*c, f, 1);
    TANDEM_CHECK(w.ok());
    held = std::make_unique<ModelWeights>(std::move(w).value());
    held_format = f;
  }
  return *held;
}

int64_t MlpBytes(const MlpWeights& w) {
  return w.gate_proj.StreamedBytes() + w.up_proj.StreamedBytes() + w.down_proj.StreamedBytes();
}

// Bytes one decode token reads: see the file comment. kv_b_proj is counted at its packed size, which
// is what the absorbed form reads for bf16 and fp8 (an int4 one is read through an fp32 copy).
int64_t BytesPerToken(const ModelWeights& m, KvCacheDtype kv, int64_t context) {
  const ModelConfig& c = m.config;
  int64_t bytes = m.lm_head.StreamedBytes() + c.hidden_size * 4;  // + the embedding row
  for (const LayerWeights& l : m.layers) {
    const MlaWeights& a = l.attn;
    for (const PackedWeight* p :
         {&a.q_proj, &a.q_a_proj, &a.q_b_proj, &a.kv_a_proj_with_mqa, &a.kv_b_proj, &a.o_proj})
      bytes += p->StreamedBytes();
    if (!l.is_moe) {
      bytes += MlpBytes(l.dense_mlp);
      continue;
    }
    bytes += static_cast<int64_t>(l.moe.router.size() * sizeof(float)) + MlpBytes(l.moe.shared_experts) +
             c.num_experts_per_tok * MlpBytes(l.moe.experts[0]);
  }
  return bytes + context * KvBytesPerToken(c, kv);
}

uint64_t NextRandom(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

// Writes `tokens` random latent rows (values in [-1, 1), bf16) into every layer of each sequence's
// pages and sets num_tokens: a cached context without running prefill.
void FillContext(kv::PagePool* kv, const ModelConfig& c, std::vector<KvSequence>* seqs, int64_t tokens) {
  const int64_t width = c.KvLatentWidth();
  std::vector<uint16_t> rows(tokens * width);
  uint64_t s = 0x2545f4914f6cdd1dull;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (KvSequence& seq : *seqs) {
      for (uint16_t& v : rows) v = FloatToBf16(static_cast<float>(NextRandom(&s) % 20000) / 10000.0f - 1.0f);
      TANDEM_CHECK(kv->CalibrateLayerScale(l, rows).ok());
      for (int64_t t = 0; t < tokens; t += kPageTokens) {
        const int64_t run = std::min(kPageTokens, tokens - t);
        TANDEM_CHECK(kv->WriteRows(seq.pages[t / kPageTokens], l, 0,
                                   std::span<const uint16_t>(rows.data() + t * width, run * width))
                         .ok());
      }
      seq.num_tokens = tokens;
    }
  }
}

struct Setup {
  std::unique_ptr<runtime::ServingEngine> serving;  // the model's runner and KV pool
  kv::PagePool* kv = nullptr;
  ModelRunner* runner = nullptr;
  std::vector<KvSequence> seqs;
};

// `batch` sequences of room for `tokens` tokens each, pages handed out in order.
Setup MakeSetup(const ModelWeights& m, KvCacheDtype dtype, int64_t batch, int64_t tokens, int threads) {
  const int64_t pages_per_seq = static_cast<int64_t>(
      runtime::KvPagesForTokens(static_cast<size_t>(tokens), static_cast<size_t>(kPageTokens)));
  runtime::ServingConfig sc;
  sc.model_weights = &m;
  sc.kv_dtype = dtype;
  sc.page_tokens = static_cast<size_t>(kPageTokens);
  sc.kv_tokens = static_cast<size_t>(batch * pages_per_seq * kPageTokens);
  sc.threads = threads;
  StatusOr<std::unique_ptr<runtime::ServingEngine>> serving = runtime::ServingEngine::Open(sc);
  TANDEM_CHECK(serving.ok());
  Setup s;
  s.serving = std::move(serving).value();
  s.kv = &s.serving->kv_pool();
  s.runner = &s.serving->runner();
  s.seqs.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < pages_per_seq; ++p)
      s.seqs[b].pages.push_back(static_cast<kv::PageId>(b * pages_per_seq + p));
  }
  return s;
}

// Reads a buffer twice this machine's L3 (300 MiB), one load per cache line: afterwards none of
// the model is cached, as for a real model whose active weights are gigabytes.
void EvictCaches() {
  static std::vector<uint8_t> buffer(size_t{600} << 20, 1);
  uint64_t sum = 0;
  for (size_t i = 0; i < buffer.size(); i += 64) sum += buffer[i];
  benchmark::DoNotOptimize(sum);
}

enum class DecodeMode { kWarm, kCold, kIntegrity };

// Sets the kernel ceiling for one benchmark row and restores it after; labels the row with the
// variants that ran.
class IsaScope {
 public:
  IsaScope(benchmark::State& state, KernelIsa isa) : state_(state), before_(KernelIsaCeiling()) {
    SetKernelIsaCeiling(isa);
  }
  ~IsaScope() {
    state_.SetLabel(std::string("isa:") + KernelIsaName(ActiveKernelIsa()) +
                    " matmul:" + kernels::cpu::MatmulIsa());
    SetKernelIsaCeiling(before_);
  }

 private:
  benchmark::State& state_;
  KernelIsa before_;
};

void BM_Decode(benchmark::State& state, WeightFormat f, KvCacheDtype dtype, int64_t batch, int threads,
               DecodeMode mode, KernelIsa isa) {
  const IsaScope scope(state, isa);
  const ModelWeights& m = Model(f);
  Setup s = MakeSetup(m, dtype, batch, kContext + 1, threads);
  FillContext(s.kv, m.config, &s.seqs, kContext);
  // The integrity tables as the engine keeps them: every page allocated once, each sequence's
  // pages mapped to its request.
  kv::TagTracker tracker(s.kv->num_pages());
  std::vector<kv::RequestPages> requests(batch);  // the page lists attention reads
  for (int64_t b = 0; b < batch; ++b) {
    requests[b] = {static_cast<kv::RequestId>(b + 1), s.seqs[b].pages};
    tracker.OnPagesAllocated(s.seqs[b].pages);
    tracker.MapPages(requests[b].request, 0, s.seqs[b].pages);
  }
  kv::VerifyResult verified;
  std::vector<int32_t> ids(batch);
  std::vector<StepInput> inputs(batch);
  for (int64_t b = 0; b < batch; ++b) {
    ids[b] = static_cast<int32_t>((b * 7919 + 1) % m.config.vocab_size);
    inputs[b] = {&s.seqs[b], std::span<const int32_t>(&ids[b], 1)};
  }
  ForwardOptions options;
  options.all_logits = false;
  std::vector<float> logits;
  int64_t step = 0;
  for (auto _ : state) {
    // A new token every step, so the router picks other experts (same bytes/token: every expert
    // has the same shape) instead of re-reading 8 cached ones.
    for (int64_t b = 0; b < batch; ++b)
      ids[b] = static_cast<int32_t>((b * 7919 + step * 104729 + 1) % m.config.vocab_size);
    ++step;
    if (mode == DecodeMode::kCold) {
      state.PauseTiming();
      EvictCaches();
      state.ResumeTiming();
    }
    if (mode == DecodeMode::kIntegrity) {
      tracker.VerifyBatch(requests, &verified);
      if (!verified.ok()) state.SkipWithError("integrity check failed");
    }
    for (KvSequence& seq : s.seqs) seq.num_tokens = kContext;
    const Status st = s.runner->Forward(inputs, options, &logits);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
  if (batch == 1) {
    const double bytes = static_cast<double>(BytesPerToken(m, dtype, kContext + 1));
    state.counters["bytes/token"] = bytes;
    state.counters["bw_frac"] = benchmark::Counter(
        state.iterations() * bytes / bench::MeasuredReadBandwidth(), benchmark::Counter::kIsRate);
  }
}

void BM_Prefill(benchmark::State& state, WeightFormat f, KvCacheDtype dtype, int threads) {
  const IsaScope scope(state, KernelIsaCeiling());
  const ModelWeights& m = Model(f);
  Setup s = MakeSetup(m, dtype, 1, kContext, threads);
  std::vector<int32_t> prompt(kContext);
  for (int64_t i = 0; i < kContext; ++i)
    prompt[i] = static_cast<int32_t>((i * 7919 + 3) % m.config.vocab_size);
  const StepInput input{&s.seqs[0], prompt};
  ForwardOptions options;
  options.all_logits = false;
  std::vector<float> logits;
  for (auto _ : state) {
    s.seqs[0].num_tokens = 0;
    const Status st = s.runner->Forward(std::span<const StepInput>(&input, 1), options, &logits);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kContext), benchmark::Counter::kIsRate);
}

// Batch-1 decode through the tensor-parallel runner: tp ranks of 2/tp threads each on this
// machine's 2 cores (tp 1 is the runner over the whole model), the context prefilled once.
void BM_DecodeTensorParallel(benchmark::State& state, WeightFormat f, int tp) {
  const IsaScope scope(state, KernelIsaCeiling());
  const ModelWeights& m = Model(f);
  kv::PagePoolConfig pc;
  pc.shape = KvShapeFor(m.config);
  pc.page_tokens = static_cast<size_t>(kPageTokens);
  pc.budget_bytes = size_t{64} << 20;
  std::unique_ptr<kv::PagePool> kv = kv::PagePool::Create(pc).value();
  StatusOr<std::unique_ptr<TensorParallelRunner>> runner =
      TensorParallelRunner::Create(m, tp, 2 / tp, kv.get());
  if (!runner.ok()) {
    state.SkipWithError(runner.status().ToString().c_str());
    return;
  }
  KvSequence seq;
  for (int64_t p = 0; p * kPageTokens < kContext + 1; ++p) seq.pages.push_back(static_cast<kv::PageId>(p));
  std::vector<int32_t> prompt(kContext);
  for (int64_t i = 0; i < kContext; ++i)
    prompt[i] = static_cast<int32_t>((i * 7919 + 3) % m.config.vocab_size);
  ForwardOptions options;
  options.all_logits = false;
  std::vector<float> logits;
  const StepInput fill{&seq, prompt};
  TANDEM_CHECK((*runner)->Forward(std::span<const StepInput>(&fill, 1), options, &logits).ok());
  int32_t id = 1;
  const StepInput input{&seq, std::span<const int32_t>(&id, 1)};
  int64_t step = 0;
  for (auto _ : state) {
    id = static_cast<int32_t>((step++ * 104729 + 1) % m.config.vocab_size);
    seq.num_tokens = kContext;
    const Status st = (*runner)->Forward(std::span<const StepInput>(&input, 1), options, &logits);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void RegisterAll() {
  // The widest variant TANDEM_ISA allows for every row; cold batch-1 rows also each narrower SIMD one.
  const KernelIsa widest = ActiveKernelIsa();
  std::vector<KernelIsa> cold_isas = {widest};
  if (widest == KernelIsa::kAvx512) cold_isas.push_back(KernelIsa::kAvx2);
  for (WeightFormat f : kFormats) {
    for (KvCacheDtype kv : kKvDtypes) {
      for (int threads : {1, 2}) {
        const std::string tail = std::string(FormatName(f)) + "/kv:" + KvName(kv);
        for (int64_t batch : {1, 8, 32, 64}) {
          const std::string name =
              "decode/" + tail + "/batch:" + std::to_string(batch) + "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_Decode, f, kv, batch, threads, DecodeMode::kWarm,
                                       widest)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
          if (batch == 1) {
            for (KernelIsa isa : cold_isas) {
              benchmark::RegisterBenchmark((name + "/cold/isa:" + KernelIsaName(isa)).c_str(), BM_Decode, f,
                                           kv, batch, threads, DecodeMode::kCold, isa)
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
            }
          } else {
            benchmark::RegisterBenchmark((name + "/integrity").c_str(), BM_Decode, f, kv, batch, threads,
                                         DecodeMode::kIntegrity, widest)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
        if (kv == KvCacheDtype::kBf16 && threads == 2) {
          for (int tp : {1, 2}) {
            benchmark::RegisterBenchmark(("decode_tp/" + tail + "/batch:1/tp:" + std::to_string(tp)).c_str(),
                                         BM_DecodeTensorParallel, f, tp)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
        const std::string name = "prefill/" + tail + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_Prefill, f, kv, threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::engine::model

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  tandem::engine::model::RegisterAll();
  std::fprintf(stderr, "model_bench: preset %s, read bandwidth %.2f GB/s (best of 8, huge pages)\n",
               tandem::engine::model::PresetName().c_str(),
               tandem::engine::bench::MeasuredReadBandwidth() * 1e-9);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
