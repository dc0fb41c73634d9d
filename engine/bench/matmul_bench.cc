// CPU matmul benchmarks (Google Benchmark): GEMV and GEMM per weight format, 1 and 2 threads,
// with weights several times larger than the L3 cache (several distinct matrices, cycled), plus
// the two machine ceilings every figure is compared with:
//   - read bandwidth: 512 MiB streamed read-only by 2 threads with 4 independent streams each;
//   - fp32 FMA peak: independent register FMA chains on every thread.
// Each GEMV reports weight GB/s (checkpoint bytes: weights + scales) and `bw_frac`, that rate over
// the measured read bandwidth; each GEMM reports GFLOP/s and `fma_frac`. GEMV rows come in pairs,
// avx512:1 (MatmulOptions::allow_avx512, the default) then avx512:0 (the AVX2 kernels), so one run
// gives the ratio; the label says which kernels ran (avx2 on a CPU without AVX-512).
//
// `model/` rows run the model's short matrices (K = 128..1024) as one MatmulBatch each, batch 1,
// weights cycled through 1 GiB: the decode step's streaming phases (docs/performance.md, "Model
// shapes").
//
//   build/engine/matmul_bench [--benchmark_filter=gemv/int4] [--benchmark_min_time=0.5s]
//   build/engine/matmul_bench --benchmark_filter='model/' --benchmark_min_time=0.2
//   build/engine/matmul_bench --benchmark_filter='gemv/.*batch:1/' --benchmark_min_time=0.3s
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "engine/bench/read_bandwidth.h"
#include "engine/core/aligned_buffer.h"
#include "engine/core/cpu_features.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kernels/cpu/matmul_batch.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr int64_t kL3Bytes = 32ll << 20;
constexpr int64_t kWorkingSetBytes = 7 * kL3Bytes;  // weights cycled through per format

uint64_t NextRandom(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

// ---- machine ceilings (read bandwidth: engine/bench/read_bandwidth.h) ------------------------
using bench::MeasuredReadBandwidth;
using bench::ReadBufferBytes;
using bench::ReadPass;

// 12 independent FMA chains in named registers (an array would be kept on the stack).
__attribute__((target("avx2,fma"))) float FmaChains(int64_t iters) {
  __m256 a0 = _mm256_set1_ps(1.00f), a1 = _mm256_set1_ps(1.01f), a2 = _mm256_set1_ps(1.02f);
  __m256 a3 = _mm256_set1_ps(1.03f), a4 = _mm256_set1_ps(1.04f), a5 = _mm256_set1_ps(1.05f);
  __m256 a6 = _mm256_set1_ps(1.06f), a7 = _mm256_set1_ps(1.07f), a8 = _mm256_set1_ps(1.08f);
  __m256 a9 = _mm256_set1_ps(1.09f), a10 = _mm256_set1_ps(1.10f), a11 = _mm256_set1_ps(1.11f);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    a0 = _mm256_fmadd_ps(a0, b, c);
    a1 = _mm256_fmadd_ps(a1, b, c);
    a2 = _mm256_fmadd_ps(a2, b, c);
    a3 = _mm256_fmadd_ps(a3, b, c);
    a4 = _mm256_fmadd_ps(a4, b, c);
    a5 = _mm256_fmadd_ps(a5, b, c);
    a6 = _mm256_fmadd_ps(a6, b, c);
    a7 = _mm256_fmadd_ps(a7, b, c);
    a8 = _mm256_fmadd_ps(a8, b, c);
    a9 = _mm256_fmadd_ps(a9, b, c);
    a10 = _mm256_fmadd_ps(a10, b, c);
    a11 = _mm256_fmadd_ps(a11, b, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  return _mm256_cvtss_f32(s);
}

// fp32 FLOP/s with every one of `threads` threads running FMA chains.
double FmaPass(int threads) {
  const int64_t iters = 20'000'000;
  std::vector<std::thread> pool;
  std::vector<float> sink(static_cast<size_t>(threads));
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = FmaChains(iters); });
  for (auto& th : pool) th.join();
  benchmark::DoNotOptimize(sink.data());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(threads) * iters * 12 * 8 * 2 / secs;
}

// Best of several passes a little apart: on a shared machine one pass can lose a core.
double MeasuredFmaPeak() {
  static const double peak = [] {
    double best = 0;
    for (int i = 0; i < 6; ++i) {
      best = std::max(best, FmaPass(2));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return best;
  }();
  return peak;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0)), streams = static_cast<int>(state.range(1));
  const bool huge = state.range(2) != 0;
  for (auto _ : state) state.SetIterationTime(ReadPass(threads, streams, huge));
  state.SetBytesProcessed(state.iterations() * ReadBufferBytes());
}

void BM_FmaPeak(benchmark::State& state) {
  double flops = 0;
  for (auto _ : state) flops = FmaPass(static_cast<int>(state.range(0)));
  state.counters["GFLOP/s"] = flops * 1e-9;
}

// ---- weights ------------------------------------------------------------------------------------
struct WeightSet {
  std::vector<PackedWeight> matrices;
  int64_t checkpoint_bytes = 0;  // per matrix: weights + scales as a checkpoint stores them
};

// Random weights. FP8 codes are uniform over the non-NaN codes, so one in 16 is an e4m3 subnormal
// (exponent 0); with fp8_subnormals false those take exponent 1 instead, as in real checkpoints,
// where block scaling leaves almost no weight below 2^-6 of the block's largest. (Kernels that turn
// them into fp32 subnormals pay a microcode assist per FMA on Intel cores.)
PackedWeight MakeWeight(WeightFormat f, int64_t n, int64_t k, uint64_t seed, int64_t* checkpoint_bytes,
                        bool fp8_subnormals = true) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  switch (f) {
    case WeightFormat::kBf16: {
      std::vector<uint16_t> w(static_cast<size_t>(n * k));
      for (auto& v : w) {
        const uint64_t r = NextRandom(&s);
        v = static_cast<uint16_t>((r & 0x807f) | ((118 + (r >> 16) % 8) << 7));  // ±[2^-9, 2^-1)
      }
      *checkpoint_bytes = n * k * 2;
      return *PackedWeight::FromBf16({w.data(), n, k});
    }
    case WeightFormat::kFp8Block128: {
      std::vector<uint8_t> w(static_cast<size_t>(n * k));
      for (auto& v : w) {
        v = static_cast<uint8_t>(NextRandom(&s));
        if ((v & 0x7f) == 0x7f) v ^= 1;
        if (!fp8_subnormals && (v & 0x78) == 0 && (v & 0x07) != 0) v |= 0x08;
      }
      std::vector<float> scale(static_cast<size_t>(Fp8ScaleRows(n) * Fp8ScaleCols(k)), 1e-3f);
      *checkpoint_bytes = n * k + static_cast<int64_t>(scale.size()) * 4;
      return *PackedWeight::FromFp8({w.data(), scale.data(), n, k});
    }
    case WeightFormat::kInt4Group32: {
      std::vector<int32_t> packed(static_cast<size_t>(n * Int4PackedCols(k)));
      for (auto& v : packed) v = static_cast<int32_t>(NextRandom(&s));
      std::vector<uint16_t> scale(static_cast<size_t>(n * Int4ScaleCols(k)), FloatToBf16(0.01f));
      *checkpoint_bytes = static_cast<int64_t>(packed.size() * 4 + scale.size() * 2);
      return *PackedWeight::FromInt4({packed.data(), scale.data(), n, k});
    }
  }
  std::abort();
}

// Enough distinct matrices of one shape that cycling through them streams from DRAM.
const WeightSet& Weights(WeightFormat f, int64_t n, int64_t k, bool fp8_subnormals) {
  static std::vector<std::pair<std::string, std::unique_ptr<WeightSet>>> cache;
  const std::string key = std::string(WeightFormatName(f)) + std::to_string(n) + "x" + std::to_string(k) +
                          (fp8_subnormals ? "" : "/normal");
  for (auto& [name, set] : cache) {
    if (name == key) return *set;
  }
  auto set = std::make_unique<WeightSet>();
  int64_t bytes = 0;
  set->matrices.push_back(MakeWeight(f, n, k, 1, &bytes, fp8_subnormals));
  set->checkpoint_bytes = bytes;
  const int64_t count = std::max<int64_t>(2, (kWorkingSetBytes + bytes - 1) / bytes);
  for (int64_t i = 1; i < count; ++i) {
    set->matrices.push_back(MakeWeight(f, n, k, i + 1, &bytes, fp8_subnormals));
  }
  cache.emplace_back(key, std::move(set));
  return *cache.back().second;
}

ThreadPool& Pool(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

// "avx2 gemv-path", plus the FP8 decode for fp8 rows.
std::string GemvLabel(WeightFormat f, const MatmulOptions& options) {
  std::string label = std::string(MatmulIsa(options)) + " gemv-path";
  if (f == WeightFormat::kFp8Block128) label += std::string(" fp8:") + MatmulFp8Decode(options);
  return label;
}

void BM_Gemv(benchmark::State& state, WeightFormat f, int64_t n, int64_t k, Int4Activation act,
             bool fp8_subnormals, Fp8Decode decode) {
  const int64_t batch = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const WeightSet& set = Weights(f, n, k, fp8_subnormals);
  std::vector<float> x(static_cast<size_t>(batch * k), 0.5f), y(static_cast<size_t>(batch * n));
  MatmulOptions options;
  options.int4_activation = act;
  options.fp8_decode = decode;
  options.allow_avx512 = state.range(2) != 0;
  if (const char* env = std::getenv("TANDEM_BENCH_GEMV_MAX_BATCH")) options.gemv_max_batch = std::atoi(env);
  size_t next = 0;
  for (auto _ : state) {
    const Status s = Matmul(set.matrices[next], x.data(), batch, y.data(), &Pool(threads), options);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    next = (next + 1) % set.matrices.size();
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(set.checkpoint_bytes) * static_cast<double>(state.iterations());
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsRate);
  state.counters["bw_frac"] =
      benchmark::Counter(bytes / MeasuredReadBandwidth(), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * batch * n * k * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(batch > options.gemv_max_batch ? "avx2 gemm-path" : GemvLabel(f, options));
}

// Batch-1 GEMV over one small matrix read again and again (cache-resident after the first call):
// the kernels' decode rate without DRAM in the way, i.e. what a core can consume.
void BM_GemvResident(benchmark::State& state, WeightFormat f, int64_t n, int64_t k, bool fp8_subnormals,
                     Fp8Decode decode) {
  const int threads = static_cast<int>(state.range(0));
  int64_t bytes = 0;
  static std::vector<std::unique_ptr<PackedWeight>> keep;
  keep.push_back(std::make_unique<PackedWeight>(MakeWeight(f, n, k, 3, &bytes, fp8_subnormals)));
  const PackedWeight& w = *keep.back();
  std::vector<float> x(static_cast<size_t>(k), 0.5f), y(static_cast<size_t>(n));
  MatmulOptions options;
  options.fp8_decode = decode;
  options.allow_avx512 = state.range(1) != 0;
  for (auto _ : state) {
    const Status s = Matmul(w, x.data(), 1, y.data(), &Pool(threads), options);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::ClobberMemory();
  }
  state.counters["weight_GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(GemvLabel(f, options));
}

// ---- the model's decode shapes (bench-wide / FP8 presets) -----------------------------------
// One decode step streams many short matrices through MatmulBatch; each row below is one such
// batch. The "layers" (one set of the batch's matrices each) are cycled through >= 1 GiB, over 3x
// the 300 MiB L3 of the Xeon VM these run on, so every call reads its weights from DRAM.
constexpr int64_t kModelWorkingSetBytes = 1ll << 30;

struct ModelPart {
  WeightFormat f;
  int64_t n, k;
  int count;
};

struct ModelShape {
  const char* name;
  std::vector<ModelPart> parts;
  bool shared_x;  // every task reads the same activations (gate/up, q_a + kv_a), else one x each
};

struct ModelLayers {
  std::string name;
  std::vector<std::vector<PackedWeight>> layers;
  int64_t layer_bytes = 0;  // checkpoint bytes of one layer
};

// Only the shape being measured is kept (1 GiB each); benchmarks of one shape run back to back.
const ModelLayers& LayersFor(const ModelShape& shape) {
  static ModelLayers current;
  if (current.name == shape.name) return current;
  current = ModelLayers{};
  current.name = shape.name;
  uint64_t seed = 11;
  while (current.layers.empty() ||
         static_cast<int64_t>(current.layers.size()) * current.layer_bytes < kModelWorkingSetBytes) {
    std::vector<PackedWeight>& layer = current.layers.emplace_back();
    int64_t layer_bytes = 0;
    for (const ModelPart& part : shape.parts) {
      for (int c = 0; c < part.count; ++c) {
        int64_t bytes = 0;
        layer.push_back(MakeWeight(part.f, part.n, part.k, seed++, &bytes, /*fp8_subnormals=*/false));
        layer_bytes += bytes;
      }
    }
    current.layer_bytes = layer_bytes;
  }
  return current;
}

void BM_ModelShape(benchmark::State& state, const ModelShape& shape) {
  const int threads = static_cast<int>(state.range(0));
  const ModelLayers& set = LayersFor(shape);
  const std::vector<PackedWeight>& first = set.layers[0];
  int64_t x_elems = 0, y_elems = 0;
  for (const PackedWeight& w : first) {
    x_elems = shape.shared_x ? std::max(x_elems, w.cols()) : x_elems + w.cols();
    y_elems += w.rows();
  }
  std::vector<float> x(static_cast<size_t>(x_elems)), y(static_cast<size_t>(y_elems));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 89) * 0.02f - 0.9f;
  std::vector<std::vector<MatmulTask>> tasks(set.layers.size());
  for (size_t l = 0; l < set.layers.size(); ++l) {
    int64_t xo = 0, yo = 0;
    for (const PackedWeight& w : set.layers[l]) {
      tasks[l].push_back({&w, x.data() + xo, 1, y.data() + yo});
      if (!shape.shared_x) xo += w.cols();
      yo += w.rows();
    }
  }
  MatmulOptions options;
  options.allow_avx512 = state.range(1) != 0;
  size_t next = 0;
  for (auto _ : state) {
    const Status s = MatmulBatch(tasks[next], &Pool(threads), options);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    next = (next + 1) % tasks.size();
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(set.layer_bytes) * static_cast<double>(state.iterations());
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsRate);
  state.counters["bw_frac"] =
      benchmark::Counter(bytes / MeasuredReadBandwidth(), benchmark::Counter::kIsRate);
  state.counters["KiB"] = static_cast<double>(set.layer_bytes) / 1024.0;
  state.SetLabel(std::string(MatmulIsa(options)) + " gemv-path");
}

// The batches of one decode step (docs/performance.md, "Model shapes"): MoE gate/up (routed int4
// experts + the bf16 shared expert of twice their width), MoE down, attention's q_a + kv_a, q_b,
// o_proj; in the FP8 preset every one of them is fp8 block-128.
const std::vector<ModelShape>& ModelShapes() {
  using F = WeightFormat;
  static const std::vector<ModelShape> shapes = {
      {"model/gate_up/int4/256x1024", {{F::kInt4Group32, 256, 1024, 1}}, true},
      {"model/gate_up/bf16/256x1024", {{F::kBf16, 256, 1024, 1}}, true},
      {"model/gate_up/fp8/256x1024", {{F::kFp8Block128, 256, 1024, 1}}, true},
      {"model/down/int4/1024x256", {{F::kInt4Group32, 1024, 256, 1}}, false},
      {"model/down_o_proj/bf16/1024x256", {{F::kBf16, 1024, 256, 1}}, false},
      {"model/down_o_proj/fp8/1024x256", {{F::kFp8Block128, 1024, 256, 1}}, false},
      {"model/moe_gate_up/bf16x2+int4x16/256x1024",
       {{F::kBf16, 256, 1024, 2}, {F::kInt4Group32, 256, 1024, 16}},
       true},
      {"model/moe_gate_up/fp8x18/256x1024", {{F::kFp8Block128, 256, 1024, 18}}, true},
      {"model/moe_down/bf16x1+int4x8/1024x256",
       {{F::kBf16, 1024, 256, 1}, {F::kInt4Group32, 1024, 256, 8}},
       false},
      {"model/moe_down/fp8x9/1024x256", {{F::kFp8Block128, 1024, 256, 9}}, false},
      {"model/q_a+kv_a/bf16/128+320x1024", {{F::kBf16, 128, 1024, 1}, {F::kBf16, 320, 1024, 1}}, true},
      {"model/q_a+kv_a/fp8/128+320x1024",
       {{F::kFp8Block128, 128, 1024, 1}, {F::kFp8Block128, 320, 1024, 1}},
       true},
      {"model/q_b/bf16/512x128", {{F::kBf16, 512, 128, 1}}, true},
      {"model/q_b/fp8/512x128", {{F::kFp8Block128, 512, 128, 1}}, true},
  };
  return shapes;
}

void BM_Gemm(benchmark::State& state, WeightFormat f, int64_t n, int64_t k) {
  const int64_t m = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  int64_t bytes = 0;
  static std::vector<std::unique_ptr<PackedWeight>> keep;
  keep.push_back(std::make_unique<PackedWeight>(MakeWeight(f, n, k, 7, &bytes)));
  const PackedWeight& w = *keep.back();
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f - 0.48f;
  for (auto _ : state) {
    const Status s = Matmul(w, x.data(), m, y.data(), &Pool(threads));
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * m * n * k * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["fma_frac"] = benchmark::Counter(flops / MeasuredFmaPeak(), benchmark::Counter::kIsRate);
  // The GEMM path is AVX2 on every x86 host with AVX2 (AVX-512 hosts included); TANDEM_ISA=portable
  // takes the portable loop.
  state.SetLabel(std::string(std::string_view(MatmulIsa()) == "portable" ? "portable" : "avx2") +
                 " gemm-path");
}

// Batch 1 at 1 and 2 threads, each with the AVX-512 kernels then the AVX2 ones.
void BatchOneRows(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "threads", "avx512"})->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int64_t t : {1, 2}) b->Args({1, t, 1})->Args({1, t, 0});
}

void RegisterAll() {
  benchmark::RegisterBenchmark("mem/read_bandwidth", BM_ReadBandwidth)
      ->Args({2, 4, 1})
      ->Args({2, 1, 1})
      ->Args({1, 4, 1})
      ->Args({2, 4, 0})
      ->ArgNames({"threads", "streams", "huge_pages"})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cpu/fma_peak", BM_FmaPeak)
      ->Arg(1)
      ->Arg(2)
      ->ArgNames({"threads"})
      ->Iterations(3);

  const struct {
    WeightFormat f;
    const char* name;
  } formats[] = {{WeightFormat::kBf16, "bf16"},
                 {WeightFormat::kFp8Block128, "fp8"},
                 {WeightFormat::kInt4Group32, "int4"}};
  // The decode shape: W[4096, 14336] (N x K), batch 1..64.
  for (const auto& fmt : formats) {
    auto* b =
        benchmark::RegisterBenchmark((std::string("gemv/") + fmt.name + "/4096x14336").c_str(), BM_Gemv,
                                     fmt.f, 4096, 14336, Int4Activation::kInt16, true, Fp8Decode::kAuto);
    b->ArgNames({"batch", "threads", "avx512"})->Unit(benchmark::kMillisecond)->UseRealTime();
    for (int64_t batch : {1, 4, 16}) {
      for (int64_t t : {1, 2}) b->Args({batch, t, 1})->Args({batch, t, 0});
    }
    for (int64_t t : {1, 2}) b->Args({64, t, 0});  // the GEMM path, AVX2 either way
  }
  // FP8 through the fp16 decode, for the A/B against whichever decode Fp8Decode::kAuto took above.
  benchmark::RegisterBenchmark("gemv/fp8_half/4096x14336", BM_Gemv, WeightFormat::kFp8Block128, 4096, 14336,
                               Int4Activation::kInt16, true, Fp8Decode::kHalf)

      ->Apply(BatchOneRows);
  benchmark::RegisterBenchmark("gemv/int4_act8/4096x14336", BM_Gemv, WeightFormat::kInt4Group32, 4096, 14336,
                               Int4Activation::kInt8, true, Fp8Decode::kAuto)

      ->Apply(BatchOneRows);
  benchmark::RegisterBenchmark("gemv/fp8_no_subnormals/4096x14336", BM_Gemv, WeightFormat::kFp8Block128, 4096,
                               14336, Int4Activation::kInt16, false, Fp8Decode::kAuto)

      ->Apply(BatchOneRows);
  // Cache-resident batch-1 GEMV: W[1024, 2048] (bf16 4 MiB, fp8 2 MiB, int4 1 MiB).
  for (const auto& fmt : formats) {
    for (int variant = 0; variant < 3; ++variant) {  // 1: no subnormal codes; 2: the fp16 decode
      if (variant > 0 && fmt.f != WeightFormat::kFp8Block128) continue;
      const bool subnormals = variant != 1;
      const std::string name = std::string("gemv_resident/") + fmt.name +
                               (variant == 1   ? "_no_subnormals"
                                : variant == 2 ? "_half"
                                               : "");
      benchmark::RegisterBenchmark((name + "/1024x2048").c_str(), BM_GemvResident, fmt.f, 1024, 2048,
                                   subnormals, variant == 2 ? Fp8Decode::kHalf : Fp8Decode::kAuto)
          ->ArgNames({"threads", "avx512"})
          ->Args({1, 1})
          ->Args({1, 0})
          ->Args({2, 1})
          ->Args({2, 0})
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  // The model's short matrices, batch 1, weights from DRAM; avx512:0 only at 2 threads.
  for (const ModelShape& shape : ModelShapes()) {
    benchmark::RegisterBenchmark(shape.name, BM_ModelShape, std::cref(shape))
        ->ArgNames({"threads", "avx512"})
        ->Args({1, 1})
        ->Args({2, 1})
        ->Args({2, 0})
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  // The prefill shape: M = 512 tokens through W[4096, 4096].
  for (const auto& fmt : formats) {
    benchmark::RegisterBenchmark((std::string("gemm/") + fmt.name + "/4096x4096").c_str(), BM_Gemm, fmt.f,
                                 4096, 4096)
        ->ArgNames({"m", "threads"})
        ->Args({512, 1})
        ->Args({512, 2})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  using namespace tandem::engine::kernels::cpu;
  std::printf("cpu: %s; kernels: %s (TANDEM_ISA caps them), fp8 decode: %s\n",
              tandem::engine::HostCpuFeatures().ToString().c_str(), MatmulIsa(), MatmulFp8Decode());
  std::printf("measured read bandwidth (2 threads x 4 streams, 512 MiB): %.2f GB/s\n",
              MeasuredReadBandwidth() * 1e-9);
  std::printf("measured fp32 FMA peak (2 threads): %.1f GFLOP/s\n", MeasuredFmaPeak() * 1e-9);
  RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
