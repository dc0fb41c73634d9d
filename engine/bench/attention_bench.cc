// MLA attention kernels at Kimi K2.x shapes (the expanded prefill form at the end of the file).
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
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/core/cpu_features.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/mla_decode.h"
#include "engine/kernels/cpu/mla_prefill.h"
#include "engine/kernels/cpu/vector_ops.h"
#include "engine/model/forward_ops.h"

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

// Expanded (prefill) attention at one Kimi K2.x tensor-parallel rank's shape (8 of its 64 heads
// at TP 8: nope 128, rope 64, v 128), a causal prompt of `tokens` tokens with nothing cached,
// keys and values already expanded (kv_b_proj's output) as MlaAttention::Expanded hands them over.
struct PrefillSetup {
  explicit PrefillSetup(int64_t tokens) : tokens(tokens) {
    std::mt19937 rng(2);
    std::normal_distribution<float> g(0.0f, 1.0f);
    q.resize(tokens * kPrefillHeads * (kNope + kRope));
    kv.resize(tokens * kPrefillHeads * (kNope + kV));
    lat.resize(tokens * (kLora + kRope));
    for (float& v : q) v = g(rng);
    for (float& v : kv) v = g(rng);
    for (float& v : lat) v = g(rng);
    shape.heads = kPrefillHeads;
    shape.nope = kNope;
    shape.rope = kRope;
    shape.v = kV;
    shape.scale = 0.072f;  // 1 / sqrt(192)
  }
  static constexpr int64_t kPrefillHeads = 8, kNope = 128, kRope = 64, kV = 128;
  int64_t tokens;
  std::vector<float> q, kv, lat;
  MlaPrefillShape shape;
};

void PrefillCounters(benchmark::State& state, int64_t tokens) {
  // Multiply-adds of the scores and the weighted sums over the causal half.
  const double pairs = static_cast<double>(tokens) * static_cast<double>(tokens + 1) / 2;
  const double flops = 2.0 * pairs * PrefillSetup::kPrefillHeads *
                       (PrefillSetup::kNope + PrefillSetup::kRope + PrefillSetup::kV);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string("isa:") + VectorOpsIsa());
}

void BM_MlaPrefill(benchmark::State& state) {
  const PrefillSetup s(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  MlaPrefillInput in;
  in.q = s.q.data();
  in.kv = s.kv.data();
  in.k_rope = s.lat.data() + kLora;
  in.k_rope_stride = kLora + PrefillSetup::kRope;
  in.num_new = s.tokens;
  std::vector<float> out(s.tokens * PrefillSetup::kPrefillHeads * PrefillSetup::kV);
  for (auto _ : state) {
    MlaPrefill(in, s.shape, &pool, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  PrefillCounters(state, s.tokens);
}

// The loop MlaAttention::Expanded ran before mla_prefill.h (per head and query: a score per key
// from two DotF32, a double-sum softmax with std::exp, then the scalar weighted sum), for comparison.
void BM_MlaPrefillHandLoop(benchmark::State& state) {
  const PrefillSetup s(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  const int64_t heads = PrefillSetup::kPrefillHeads, nope = PrefillSetup::kNope, rope = PrefillSetup::kRope;
  const int64_t vdim = PrefillSetup::kV, qk = nope + rope, per_head = nope + vdim, width = kLora + rope;
  const int64_t ctx = s.tokens;
  std::vector<float> out(ctx * heads * vdim);
  for (auto _ : state) {
    pool.ParallelFor(heads, 1, [&](int64_t h_begin, int64_t h_end, int) {
      std::vector<float> p(ctx);
      for (int64_t h = h_begin; h < h_end; ++h) {
        for (int64_t i = 0; i < ctx; ++i) {
          const float* qh = s.q.data() + (i * heads + h) * qk;
          for (int64_t j = 0; j < ctx; ++j) {
            if (j > i) {
              p[j] = -std::numeric_limits<float>::infinity();
              continue;
            }
            const float* kj = s.kv.data() + (j * heads + h) * per_head;
            const double sc = static_cast<double>(DotF32(qh, kj, nope)) +
                              DotF32(qh + nope, s.lat.data() + j * width + kLora, rope);
            p[j] = static_cast<float>(sc * s.shape.scale);
          }
          model::SoftmaxInPlace(p.data(), ctx);
          float* o = out.data() + (i * heads + h) * vdim;
          std::fill(o, o + vdim, 0.0f);
          for (int64_t j = 0; j < ctx; ++j) {
            if (p[j] == 0.0f) continue;
            const float* vj = s.kv.data() + (j * heads + h) * per_head + nope;
            for (int64_t d = 0; d < vdim; ++d) o[d] += p[j] * vj[d];
          }
        }
      }
    });
    benchmark::DoNotOptimize(out.data());
  }
  PrefillCounters(state, s.tokens);
}

// The prompts and threads both prefill benchmarks run, so their rows pair up.
void PrefillRuns(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tokens", "threads"})
      ->Args({1024, 1})
      ->Args({1024, 2})
      ->Args({4096, 2})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

BENCHMARK(BM_MlaPrefill)->Apply(PrefillRuns);
BENCHMARK(BM_MlaPrefillHandLoop)->Apply(PrefillRuns);

}  // namespace
}  // namespace tandem::engine::kernels::cpu

BENCHMARK_MAIN();
