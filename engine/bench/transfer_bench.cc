// KV transfer benchmarks (Google Benchmark), numbers in docs/performance.md ("KV export"):
// the prefill side's KvExport::NextPage work per page, one thread: a 64-token page of every
// layer converted into the decode pool's layout (BF16 -> FP8 e4m3 with the decode pool's scales,
// or a plain copy for the same layout), the digest included. Reports GB/s of page bytes produced
// and the wire ratio (target page bytes / source page bytes: 0.5 for the latent, GLM's with its
// indexer rows), for the Kimi K2.x (61 layers) and GLM 5.x (78 layers with indexer rows) shapes.
//
//   build/engine/transfer_bench [--benchmark_min_time=0.5]
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/logging.h"
#include "engine/formats/convert.h"
#include "engine/formats/float_codecs.h"
#include "engine/kv/page_convert.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/transfer_tags.h"
#include "engine/model/kv_shape.h"
#include "engine/model/presets.h"

namespace tandem::engine::kv {
namespace {

constexpr size_t kPageTokens = 64;
constexpr size_t kPages = 8;  // source pages cycled through (each ~4.5 MB for Kimi in BF16)

std::unique_ptr<PagePool> MakePool(const KvShape& shape, KvCacheDtype dtype, std::vector<float> scales) {
  PagePoolConfig pc;
  pc.shape = shape;
  pc.dtype = dtype;
  pc.page_tokens = kPageTokens;
  pc.fp8_layer_scales = std::move(scales);
  pc.budget_bytes = kPages * ComputePageBytes(pc).value();
  return PagePool::Create(pc).value();
}

// state.range(0): 0 = Kimi K2.x, 1 = GLM 5.x; range(1): target dtype (0 bf16, 1 fp8_e4m3);
// range(2): the widest BF16 -> e4m3 encoder variant allowed (ConvertIsa: 0 portable, 1 AVX2,
// 2 AVX-512), so an AVX-512 host measures the AVX2 path too.
void BM_ExportPage(benchmark::State& state) {
  LimitConvertIsaForTesting(static_cast<ConvertIsa>(state.range(2)));
  const model::ModelConfig config = model::Preset(state.range(0) == 0 ? "kimi-k2.6" : "glm-5.2").value();
  const KvShape shape = model::KvShapeFor(config);
  const KvCacheDtype target_dtype = state.range(1) == 0 ? KvCacheDtype::kBf16 : KvCacheDtype::kFp8E4M3;
  auto src = MakePool(shape, KvCacheDtype::kBf16, {});
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> rows(kPageTokens * shape.row_values());
  std::vector<float> keys(kPageTokens * shape.index_head_dim);
  for (PageId p = 0; p < kPages; ++p) {
    for (size_t l = 0; l < shape.num_layers; ++l) {
      for (uint16_t& v : rows) v = FloatToBf16(dist(rng));
      TANDEM_CHECK(src->WriteRows(p, l, 0, rows).ok());
      if (shape.index_head_dim > 0 && (shape.index_layers.empty() || shape.index_layers[l])) {
        for (float& k : keys) k = dist(rng);
        TANDEM_CHECK(src->WriteIndexKeys(p, l, 0, keys).ok());
      }
    }
  }
  std::vector<float> scales;
  if (target_dtype == KvCacheDtype::kFp8E4M3) scales.assign(shape.num_layers, 4.0f / 448.0f);
  auto dst = MakePool(shape, target_dtype, scales);
  const KvLayout layout = LayoutOf(*dst).value();
  auto converter = PageConverter::Create(*src, layout).value();
  std::vector<uint8_t> out(layout.page_bytes);
  PageId page = 0;
  for (auto _ : state) {
    KvDigest digest;
    TANDEM_CHECK(converter->Convert(page, kPageTokens, out).ok());
    digest.Update(out);
    benchmark::DoNotOptimize(digest.Finish());
    page = (page + 1) % kPages;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * layout.page_bytes));
  state.counters["wire_ratio"] =
      static_cast<double>(layout.page_bytes) / static_cast<double>(src->geometry().page_bytes);
  state.counters["page_MB"] = static_cast<double>(layout.page_bytes) / 1e6;
  LimitConvertIsaForTesting(ConvertIsa::kAvx512);
}
BENCHMARK(BM_ExportPage)
    ->ArgNames({"glm", "fp8", "isa"})
    ->Args({0, 0, 2})
    ->Args({0, 1, 0})
    ->Args({0, 1, 1})
    ->Args({0, 1, 2})
    ->Args({1, 0, 2})
    ->Args({1, 1, 0})
    ->Args({1, 1, 1})
    ->Args({1, 1, 2})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::engine::kv

BENCHMARK_MAIN();
