// GPU test (label `gpu`): paged MLA decode attention on CUDA against its CPU twin's double oracle
// (engine/kernels/cpu/mla_decode.h), BF16 and FP8 pages, requests of different lengths
// (1, 17, 97 and long ones across splits), odd page sizes, pages scattered and strided as in a
// pool of several layers, outputs poisoned before the launch, fresh random inputs each run (the
// seed is printed). Then the bandwidth and FP8/BF16 figures at batch 64 x 8K context.
// Skips, rather than fails, when the machine has no usable CUDA device.
#include "engine/kernels/cuda/mla_decode_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cuda/cuda_test_support.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/mla_decode.h"

namespace tandem::engine::cuda {
namespace {

// fp32 on the GPU (fused, reordered sums; expf) against double.
constexpr double kNmseMlaDecode = 1e-10;

using MlaDecodeCudaTest = CudaDeviceTest;

// A pool of `num_pages` pages of 2 layers; the tested layer is the second.
struct Pool {
  std::vector<uint8_t> bytes;
  PagedLatent kv;
  int num_pages = 0;
};

Pool MakePool(bool fp8, int num_pages, int page_tokens, int width, std::mt19937& rng) {
  Pool p;
  const int elem = fp8 ? 1 : 2;
  const int64_t layer_bytes = static_cast<int64_t>(page_tokens) * width * elem;
  p.kv.page_stride = 2 * layer_bytes + 64;  // two layers and some other bytes
  p.kv.layer_offset = layer_bytes;
  p.kv.page_tokens = page_tokens;
  p.kv.width = width;
  p.kv.fp8 = fp8;
  p.kv.kv_scale = fp8 ? 0.0173f : 1.0f;
  p.num_pages = num_pages;
  p.bytes.resize(static_cast<size_t>(p.kv.page_stride) * num_pages);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (size_t i = 0; i < p.bytes.size(); i += elem) {
    if (fp8) {
      p.bytes[i] = FloatToFp8E4M3(g(rng) * 60.0f);
    } else {
      const uint16_t b = FloatToBf16(g(rng));
      std::memcpy(&p.bytes[i], &b, 2);
    }
  }
  return p;
}

TEST_F(MlaDecodeCudaTest, MatchesTheCpuOracleForBothPageDtypes) {
  const uint32_t seed = std::random_device{}();
  std::printf("[mla-decode] seed %u\n", seed);
  std::mt19937 rng(seed);
  const int width = 576, kv_lora = 512, heads = 12;  // a partial head group
  const float softmax_scale = 0.0723f;
  for (bool fp8 : {false, true}) {
    for (int page_tokens : {1, 16, 64}) {
      const std::vector<int> contexts = {1, 17, 97, 300, 1025};
      const int max_context = *std::max_element(contexts.begin(), contexts.end());
      const int max_pages = (max_context + page_tokens - 1) / page_tokens;
      const int batch = static_cast<int>(contexts.size());
      Pool pool = MakePool(fp8, batch * max_pages + 3, page_tokens, width, rng);
      std::vector<int32_t> ids(pool.num_pages);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::vector<int32_t> table(batch * max_pages);
      std::copy_n(ids.begin(), table.size(), table.begin());
      std::vector<float> q(static_cast<size_t>(batch) * heads * width);
      std::normal_distribution<float> g(0.0f, 0.2f);
      for (float& v : q) v = g(rng);
      // The oracle: the CPU kernel's (kernels::cpu::MlaDecodeRef, double) over the same pages.
      std::vector<std::vector<const uint8_t*>> pages(batch);
      std::vector<kernels::cpu::MlaQuery> queries(batch);
      for (int b = 0; b < batch; ++b) {
        for (int k = 0; k < max_pages; ++k)
          pages[b].push_back(pool.bytes.data() + table[b * max_pages + k] * pool.kv.page_stride +
                             pool.kv.layer_offset);
        queries[b].q_cat = q.data() + static_cast<size_t>(b) * heads * width;
        queries[b].rows = {pages[b].data(),
                           fp8 ? kernels::cpu::RowFormat::kFp8E4M3 : kernels::cpu::RowFormat::kBf16,
                           page_tokens, width};
        queries[b].context = queries[b].visible = contexts[b];
      }
      kernels::cpu::MlaDecodeShape shape;
      shape.heads = heads;
      shape.kv_lora = kv_lora;
      shape.score_scale = softmax_scale * pool.kv.kv_scale;
      shape.kv_scale = pool.kv.kv_scale;
      std::vector<float> want(static_cast<size_t>(batch) * heads * kv_lora);
      kernels::cpu::MlaDecodeRef(queries, shape, want.data());
      uint8_t* d_pages = DeviceCopy(pool.bytes);
      float* d_q = DeviceCopy(q);
      int32_t* d_table = DeviceCopy(table);
      std::vector<int32_t> ctx32(contexts.begin(), contexts.end());
      int32_t* d_ctx = DeviceCopy(ctx32);
      std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
      float* d_out = DeviceCopy(got);  // poisoned
      void* d_ws = nullptr;
      ASSERT_EQ(cudaMalloc(&d_ws, MlaDecodeWorkspaceBytes(batch, heads, kv_lora, max_context)), cudaSuccess);
      PagedLatent kv = pool.kv;
      kv.pages = d_pages;
      ASSERT_EQ(LaunchMlaDecode(d_q, batch, heads, d_table, max_pages, d_ctx, max_context, kv, kv_lora,
                                softmax_scale, d_out, d_ws, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (void* p : {static_cast<void*>(d_pages), static_cast<void*>(d_q), static_cast<void*>(d_table),
                      static_cast<void*>(d_ctx), static_cast<void*>(d_out), d_ws})
        cudaFree(p);
      double err = 0, norm = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " not written";
        err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
      }
      EXPECT_LE(err / norm, kNmseMlaDecode) << (fp8 ? "fp8" : "bf16") << " page_tokens " << page_tokens;
    }
  }
}

// Batch 64 x 8,192-token contexts, Kimi K2.x's 8 heads per GPU at TP8 (576-wide rows): time per
// launch, KV bytes read per second against a device-to-device copy's, FP8 / BF16 time.
TEST_F(MlaDecodeCudaTest, BandwidthAtBatch64By8K) {
  const int batch = 64, ctx = 8192, heads = 8, width = 576, kv_lora = 512, page_tokens = 64;
  const int max_pages = ctx / page_tokens;
  std::mt19937 rng(7);
  double ms[2] = {0, 0};
  const double copy_gbs = CopyBandwidthGbs();  // 1 GiB device to device, read + write
  ASSERT_GT(copy_gbs, 0.0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (bool fp8 : {false, true}) {
    Pool pool = MakePool(fp8, batch * max_pages, page_tokens, width, rng);
    pool.kv.page_stride = static_cast<int64_t>(page_tokens) * width * (fp8 ? 1 : 2);  // one layer, dense
    pool.kv.layer_offset = 0;
    pool.bytes.resize(static_cast<size_t>(pool.kv.page_stride) * pool.num_pages);
    std::vector<int32_t> table(batch * max_pages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<float> q(static_cast<size_t>(batch) * heads * width, 0.01f);
    std::vector<int32_t> ctxs(batch, ctx);
    uint8_t* d_pages = DeviceCopy(pool.bytes);
    float* d_q = DeviceCopy(q);
    int32_t* d_table = DeviceCopy(table);
    int32_t* d_ctx = DeviceCopy(ctxs);
    float* d_out = nullptr;
    void* d_ws = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), sizeof(float) * batch * heads * kv_lora),
              cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_ws, MlaDecodeWorkspaceBytes(batch, heads, kv_lora, ctx)), cudaSuccess);
    PagedLatent kv = pool.kv;
    kv.pages = d_pages;
    auto launch = [&] {
      return LaunchMlaDecode(d_q, batch, heads, d_table, max_pages, d_ctx, ctx, kv, kv_lora, 0.07f, d_out,
                             d_ws, nullptr);
    };
    ASSERT_EQ(launch(), cudaSuccess);
    cudaDeviceSynchronize();
    cudaEventRecord(e0);
    for (int i = 0; i < 20; ++i) launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float total = 0;
    cudaEventElapsedTime(&total, e0, e1);
    ms[fp8] = total / 20;
    const double kv_bytes = static_cast<double>(batch) * ctx * width * (fp8 ? 1 : 2);
    std::printf(
        "[gpu-bench] mla_decode %s batch %d ctx %d heads %d: %.3f ms, KV %.0f GB/s = %.0f%% of copy %.0f "
        "GB/s\n",
        fp8 ? "fp8" : "bf16", batch, ctx, heads, ms[fp8], kv_bytes / (ms[fp8] * 1e-3) / 1e9,
        100.0 * kv_bytes / (ms[fp8] * 1e-3) / 1e9 / copy_gbs, copy_gbs);
    for (void* p : {static_cast<void*>(d_pages), static_cast<void*>(d_q), static_cast<void*>(d_table),
                    static_cast<void*>(d_ctx), static_cast<void*>(d_out), d_ws})
      cudaFree(p);
  }
  std::printf("[gpu-bench] mla_decode fp8 / bf16 time: %.3f (target <= 0.55)\n", ms[1] / ms[0]);
  EXPECT_GT(ms[0], 0.0);
}

}  // namespace
}  // namespace tandem::engine::cuda
