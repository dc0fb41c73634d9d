// Decode attention over paged latent rows at Kimi K2.x's shape (64 heads, 576-wide latent rows,
// kv_lora 512), one layer, the absorbed form's inner loops as MlaAttention runs them: per request
// and block of 32 rows, the scores of all 64 heads (AttentionScores), e^(s - max), then the 64
// weighted row sums (AttentionWeightedSums). Requests' pages (64 tokens) are scattered over a pool
// larger than the caches, so rows come from DRAM as in service. Configurations:
//   bf16            BF16 pages read in place;
//   fp8             FP8 pages, blocks widened once to bf16 (what the engine does for > 4 heads);
//   fp8_in_place    FP8 pages decoded by the kernels for every group of 4 heads (the engine's
//                   path for <= 4 heads), for comparison.
// One thread (the kernels' cost; the engine splits blocks over its pool). Reports KV GB/s read.
//
//   build/engine/attention_bench [--benchmark_filter=...] (TANDEM_ISA=avx2 for the AVX2 kernels)
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/core/cpu_features.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/mla_decode.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr int64_t kHeads = 64, kWidth = 576, kLora = 512, kPageTokens = 64, kBlockRows = 32;

enum Config { kBf16 = 0, kFp8 = 1, kFp8InPlace = 2 };

struct Setup {
  Setup(int64_t batch, int64_t context, bool fp8) : batch(batch), context(context) {
    const int64_t pages_per = (context + kPageTokens - 1) / kPageTokens;
    const int64_t num_pages = batch * pages_per * 2;  // half the pool unused: scattered pages
    const int64_t page_elems = kPageTokens * kWidth;
    std::mt19937 rng(1);
    std::normal_distribution<float> g(0.0f, 1.0f);
    if (fp8) {
      pool8.resize(num_pages * page_elems);
      for (uint8_t& c : pool8) c = FloatToFp8E4M3(g(rng) * 50.0f);
    } else {
      pool16.resize(num_pages * page_elems);
      for (uint16_t& b : pool16) b = FloatToBf16(g(rng));
    }
    std::vector<int64_t> order(num_pages);
    for (int64_t i = 0; i < num_pages; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    pages.resize(batch);
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t p = 0; p < pages_per; ++p) pages[r].push_back(order[r * pages_per + p]);
    q.resize(kHeads * kWidth);
    for (float& v : q) v = g(rng) * 0.05f;
  }
  RowsRef Page(int64_t r, int64_t p) const {
    const int64_t at = pages[r][p] * kPageTokens * kWidth;
    if (!pool8.empty()) return {pool8.data() + at, RowFormat::kFp8E4M3, kWidth};
    return {pool16.data() + at, RowFormat::kBf16, kWidth};
  }
  int64_t batch, context;
  std::vector<uint16_t> pool16;
  std::vector<uint8_t> pool8;
  std::vector<std::vector<int64_t>> pages;
  std::vector<float> q;
};

void BM_DecodeAttention(benchmark::State& state) {
  const Config config = static_cast<Config>(state.range(0));
  const int64_t batch = state.range(1), context = state.range(2);
  const Setup s(batch, context, config != kBf16);
  std::vector<float> scores(kHeads * kBlockRows), sums(kHeads * kLora);
  std::vector<uint16_t> widened(kBlockRows * kWidth);
  for (auto _ : state) {
    for (int64_t r = 0; r < batch; ++r) {
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t first = 0; first < context; first += kBlockRows) {  // blocks stay within a page
        const int64_t n = std::min(kBlockRows, context - first);
        RowsRef rows = s.Page(r, first / kPageTokens);
        rows.data = static_cast<const char*>(rows.data) +
                    (first % kPageTokens) * kWidth * (rows.format == RowFormat::kBf16 ? 2 : 1);
        if (config == kFp8) {
          Fp8RowsToBf16(rows, n, kWidth, widened.data());
          rows = {widened.data(), RowFormat::kBf16, kWidth};
        }
        AttentionScores(s.q.data(), kHeads, kWidth, rows, n, kWidth, scores.data(), kBlockRows);
        for (int64_t h = 0; h < kHeads; ++h) {
          float* sh = scores.data() + h * kBlockRows;
          const float m = *std::max_element(sh, sh + n);
          for (int64_t j = 0; j < n; ++j) sh[j] = std::exp((sh[j] - m) * 0.07f);
        }
        AttentionWeightedSums(scores.data(), kHeads, kBlockRows, rows, n, kLora, sums.data(), kLora);
      }
    }
    benchmark::DoNotOptimize(sums.data());
  }
  const double kv_bytes = static_cast<double>(batch * context * kWidth * (config == kBf16 ? 2 : 1));
  state.counters["kv_GB/s"] = benchmark::Counter(kv_bytes * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::string(config == kBf16  ? "bf16"
                             : config == kFp8 ? "fp8"
                                              : "fp8_in_place") +
                 " isa:" + AttentionIsa());
}

BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"kv", "batch", "context"})
    ->Args({kBf16, 1, 8192})
    ->Args({kFp8, 1, 8192})
    ->Args({kFp8InPlace, 1, 8192})
    ->Args({kBf16, 8, 8192})
    ->Args({kFp8, 8, 8192})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The kernel the engine runs (mla_decode.h: MlaDecode, the batch-1 split of blocks over the
// threads, then the folds), same shape and pages, with 1 and 2 threads: what the inner loops above
// cost once the blocks, the folds and the threads are added.
void BM_MlaDecode(benchmark::State& state) {
  const Config config = static_cast<Config>(state.range(0));
  const int64_t batch = state.range(1), context = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const Setup s(batch, context, config != kBf16);
  const RowFormat format = config == kBf16 ? RowFormat::kBf16 : RowFormat::kFp8E4M3;
  const int64_t elem = config == kBf16 ? 2 : 1;
  std::vector<std::vector<const uint8_t*>> pages(batch);
  std::vector<MlaQuery> queries;
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t p : s.pages[r]) {
      const void* base = config == kBf16 ? static_cast<const void*>(s.pool16.data()) : s.pool8.data();
      pages[r].push_back(static_cast<const uint8_t*>(base) + p * kPageTokens * kWidth * elem);
    }
    queries.push_back(
        {s.q.data(), {pages[r].data(), format, kPageTokens, kWidth}, context, context, nullptr});
  }
  MlaDecodeShape shape;
  shape.heads = kHeads;
  shape.kv_lora = kLora;
  shape.score_scale = 0.07f;
  ThreadPool pool(threads);
  std::vector<float> out(batch * kHeads * kLora);
  for (auto _ : state) {
    MlaDecode(queries, shape, &pool, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double kv_bytes = static_cast<double>(batch * context * kWidth * elem);
  state.counters["kv_GB/s"] = benchmark::Counter(kv_bytes * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::string(config == kBf16 ? "bf16" : "fp8") + " isa:" + AttentionIsa());
}

BENCHMARK(BM_MlaDecode)
    ->ArgNames({"kv", "batch", "context", "threads"})
    ->Args({kBf16, 1, 8192, 1})
    ->Args({kFp8, 1, 8192, 1})
    ->Args({kBf16, 1, 8192, 2})
    ->Args({kFp8, 1, 8192, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tandem::engine::kernels::cpu

BENCHMARK_MAIN();
