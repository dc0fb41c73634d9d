// KV cache benchmarks (Google Benchmark), numbers in docs/kv-cache.md:
//   - VerifyBatch cost per decode step: batch of B requests x T-token contexts in 64-token pages
//     (the case: 64 x 8K = 8,192 pages), each request's real page list (what attention
//     reads) checked against its manifest, TagTracker vs NoopTracker; reports ns per page checked;
//   - the page pool capacity table (tokens held, BF16 vs FP8, 1/4/16 GiB, Kimi K2.6 61 layers, a
//     scaled 4-layer benchmark shape and GLM 5.2 with its DSA indexer keys), printed before the
//     benchmarks run.
//
//   build/engine/kv_bench [--benchmark_filter=verify] [--benchmark_min_time=0.5]
#include <cstdio>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/kv/integrity_tracker.h"
#include "engine/kv/page_allocator.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/transfer_tags.h"

namespace tandem::engine::kv {
namespace {

constexpr size_t kPageTokens = 64;

// A decode pool whose `batch` running requests each map `context_tokens` tokens of pages.
struct VerifySetup {
  VerifySetup(size_t batch, size_t context_tokens, bool tags) {
    const size_t pages_per_request = (context_tokens + kPageTokens - 1) / kPageTokens;
    const size_t num_pages = batch * pages_per_request * 2;  // half the pool free, as in service
    if (tags) {
      tracker = std::make_unique<TagTracker>(num_pages);
    } else {
      tracker = std::make_unique<NoopTracker>();
    }
    alloc = std::make_unique<PageAllocator>(num_pages, tracker.get());
    // Interleave allocations so a request's pages are scattered over the table, as after churn.
    pages.resize(batch);
    for (size_t i = 0; i < pages_per_request; ++i) {
      for (size_t r = 0; r < batch; ++r) {
        std::vector<PageRef> one;
        (void)alloc->Allocate(2, &one);
        pages[r].push_back(one[i % 2].page);
        (void)alloc->Unref(one[(i + 1) % 2]);
      }
    }
    for (size_t r = 0; r < batch; ++r) {
      tracker->MapPages(r + 1, 0, pages[r]);
      requests.push_back({r + 1, pages[r]});
    }
  }
  std::unique_ptr<IntegrityTracker> tracker;
  std::unique_ptr<PageAllocator> alloc;
  std::vector<std::vector<PageId>> pages;  // each request's page list, as the kernels read it
  std::vector<RequestPages> requests;
};

void BM_VerifyBatch(benchmark::State& state) {
  const size_t batch = static_cast<size_t>(state.range(0));
  const size_t context = static_cast<size_t>(state.range(1));
  const bool tags = state.range(2) != 0;
  VerifySetup setup(batch, context, tags);
  VerifyResult result;
  for (auto _ : state) {
    setup.tracker->VerifyBatch(setup.requests, &result);
    benchmark::DoNotOptimize(result.failed.data());
  }
  if (!result.ok()) state.SkipWithError("clean batch failed verification");
  const double pages = static_cast<double>(batch * ((context + kPageTokens - 1) / kPageTokens));
  state.counters["pages"] = pages;
  state.counters["ns_per_page"] =
      benchmark::Counter(pages * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(tags ? "tags" : "noop");
}
BENCHMARK(BM_VerifyBatch)
    ->Name("verify")
    ->Args({64, 8192, 1})
    ->Args({64, 8192, 0})
    ->Args({1, 8192, 1})
    ->Args({16, 8192, 1})
    ->Args({64, 32768, 1})
    ->Unit(benchmark::kMicrosecond);

// Digest of one request's transferred KV (8K tokens, Kimi shape, FP8): bytes/s of the check the
// decode side runs before the first token.
void BM_DigestKv(benchmark::State& state) {
  PagePoolConfig c;
  c.dtype = KvCacheDtype::kFp8E4M3;
  c.shape.num_layers = static_cast<size_t>(state.range(0));
  const size_t tokens = 8192;
  c.budget_bytes = (tokens / kPageTokens) * c.shape.num_layers * kPageTokens * 576;
  auto pool = PagePool::Create(c);
  if (!pool.ok()) {
    state.SkipWithError(pool.status().ToString().c_str());
    return;
  }
  std::vector<PageId> pages;
  for (PageId p = 0; p < (*pool)->num_pages(); ++p) pages.push_back(p);
  for (auto _ : state) benchmark::DoNotOptimize(DigestKv(**pool, pages, tokens).value());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(tokens * c.shape.num_layers * 576));
}
BENCHMARK(BM_DigestKv)->Name("digest_8k_fp8")->Arg(61)->Unit(benchmark::kMillisecond);

void PrintCapacityTable() {
  std::printf("KV pool capacity (pages of %zu tokens, MLA latent 512+64, GLM: + 128 indexer keys):\n",
              kPageTokens);
  std::printf("%-22s %6s %14s %14s %8s\n", "shape", "GiB", "bf16 tokens", "fp8 tokens", "ratio");
  const struct {
    const char* name;
    size_t layers;
    size_t index_head_dim;
  } shapes[] = {
      {"Kimi K2.6 (61 layers)", 61, 0}, {"bench (4 layers)", 4, 0}, {"GLM 5.2 (78 + DSA)", 78, 128}};
  for (const auto& shape : shapes) {
    for (size_t gib : {1, 4, 16}) {
      PagePoolConfig c;
      c.shape.num_layers = shape.layers;
      c.shape.index_head_dim = shape.index_head_dim;
      c.budget_bytes = gib << 30;
      const size_t bf16 = ComputePoolGeometry(c)->capacity_tokens;
      c.dtype = KvCacheDtype::kFp8E4M3;
      const size_t fp8 = ComputePoolGeometry(c)->capacity_tokens;
      std::printf("%-22s %6zu %14zu %14zu %8.4f\n", shape.name, gib, bf16, fp8,
                  static_cast<double>(fp8) / static_cast<double>(bf16));
    }
  }
}

}  // namespace
}  // namespace tandem::engine::kv

int main(int argc, char** argv) {
  tandem::engine::kv::PrintCapacityTable();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
