// GPU test (label `gpu`): expanded (prefill) MLA attention on CUDA against the CPU kernel's double
// oracle (engine/kernels/cpu/mla_prefill.h: MlaPrefillRef), at odd widths and at one Kimi K2.x
// TP-8 rank's (8 heads, 128/64/128), prompts of 1, 17, 97 tokens and chunks over cached prefixes
// (across the kernel's 128-key chunks), causal and DSA-masked (a query that sees no key gets
// zeros), outputs poisoned before the launch and past its end, fresh random inputs each run (the
// seed is printed); bad shapes refused; then the time of a 4,096-token prompt at the Kimi rank
// shape. Skips, rather than fails, when the machine has no usable CUDA device.
#include "engine/kernels/cuda/mla_prefill_cuda.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cuda/cuda_test_support.h"
#include "engine/kernels/cpu/mla_prefill_test_case.h"

namespace tandem::engine::cuda {
namespace {

// fp32 on the GPU (fused, reordered sums; expf) against double.
constexpr double kNmseMlaPrefill = 1e-10;
constexpr int kGuard = 5;  // poisoned floats past the output

using MlaPrefillCudaTest = CudaDeviceTest;

TEST_F(MlaPrefillCudaTest, MatchesTheCpuOracle) {
  const uint32_t seed = std::random_device{}();
  std::printf("[mla-prefill] seed %u\n", seed);
  std::mt19937 rng(seed);
  const int shapes[][4] = {{3, 13, 6, 9}, {8, 128, 64, 128}, {2, 40, 24, 200}};      // heads, nope, rope, v
  const int steps[][2] = {{0, 1}, {0, 17}, {0, 97}, {40, 17}, {150, 9}, {300, 33}};  // {past, new}
  for (const auto& s : shapes) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(s[1] + s[2]));
    for (const auto& step : steps) {
      for (bool masked : {false, true}) {
        const kernels::cpu::MlaPrefillCase c(kernels::cpu::PrefillShape(s[0], s[1], s[2], s[3], scale),
                                             step[0], step[1], masked, static_cast<uint32_t>(rng()),
                                             /*lora_rank=*/7);
        const std::vector<float> want = c.Ref();
        const size_t out_floats = want.size();
        float* d_q = DeviceCopy(c.q);
        float* d_kv = DeviceCopy(c.kv);
        float* d_lat = DeviceCopy(c.lat);
        uint8_t* d_mask = masked ? DeviceCopy(c.mask) : nullptr;
        std::vector<float> got(out_floats + kGuard, std::numeric_limits<float>::quiet_NaN());
        float* d_out = DeviceCopy(got);  // poisoned
        MlaPrefillDeviceInput in;
        in.q = d_q;
        in.kv = d_kv;
        in.k_rope = d_lat + c.lora;
        in.k_rope_stride = c.lora + s[2];
        in.past = step[0];
        in.num_new = step[1];
        in.mask = d_mask;
        ASSERT_EQ(LaunchMlaPrefill(in, s[0], s[1], s[2], s[3], scale, d_out, nullptr), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (void* p : {static_cast<void*>(d_q), static_cast<void*>(d_kv), static_cast<void*>(d_lat),
                        static_cast<void*>(d_mask), static_cast<void*>(d_out)})
          cudaFree(p);
        double err = 0, norm = 0;
        for (size_t e = 0; e < out_floats; ++e) {
          ASSERT_TRUE(std::isfinite(got[e])) << "output " << e << " not written";
          err += (static_cast<double>(got[e]) - want[e]) * (static_cast<double>(got[e]) - want[e]);
          norm += static_cast<double>(want[e]) * want[e];
        }
        for (size_t e = out_floats; e < got.size(); ++e)
          ASSERT_TRUE(std::isnan(got[e])) << "wrote past the end";
        EXPECT_LE(err / norm, kNmseMlaPrefill) << c.Name();
        if (masked && step[1] > 2) {  // query 1 sees no key
          for (int e = 0; e < s[0] * s[3]; ++e) ASSERT_EQ(got[s[0] * s[3] + e], 0.0f) << c.Name();
        }
      }
    }
  }
}

TEST_F(MlaPrefillCudaTest, BadShapesAreRefused) {
  MlaPrefillDeviceInput in;
  in.num_new = 1;
  EXPECT_EQ(LaunchMlaPrefill(in, 1, 16, 8, kMlaPrefillMaxV + 1, 1.0f, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchMlaPrefill(in, 1, kMlaPrefillMaxQk, 8, 16, 1.0f, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchMlaPrefill(in, -1, 16, 8, 16, 1.0f, nullptr, nullptr), cudaErrorInvalidValue);
  in.num_new = 0;
  EXPECT_EQ(LaunchMlaPrefill(in, 1, 16, 8, 16, 1.0f, nullptr, nullptr), cudaSuccess);  // nothing to do
}

// A 4,096-token prompt, nothing cached, one Kimi K2.x TP-8 rank's heads: time per launch and the
// rate of the scores' and sums' multiply-adds (the CPU figure for the same shape is in
// docs/performance.md).
TEST_F(MlaPrefillCudaTest, TimeOfA4KPromptAtKimiRankShape) {
  const int n = 4096, heads = 8, nope = 128, rope = 64, v = 128, lora = 512;
  std::vector<float> q(static_cast<size_t>(n) * heads * (nope + rope), 0.01f);
  std::vector<float> kv(static_cast<size_t>(n) * heads * (nope + v), 0.02f);
  std::vector<float> lat(static_cast<size_t>(n) * (lora + rope), 0.03f);
  float* d_q = DeviceCopy(q);
  float* d_kv = DeviceCopy(kv);
  float* d_lat = DeviceCopy(lat);
  float* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), sizeof(float) * n * heads * v), cudaSuccess);
  MlaPrefillDeviceInput in;
  in.q = d_q;
  in.kv = d_kv;
  in.k_rope = d_lat + lora;
  in.k_rope_stride = lora + rope;
  in.num_new = n;
  ASSERT_EQ(LaunchMlaPrefill(in, heads, nope, rope, v, 0.072f, d_out, nullptr), cudaSuccess);
  cudaDeviceSynchronize();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  for (int r = 0; r < 5; ++r) LaunchMlaPrefill(in, heads, nope, rope, v, 0.072f, d_out, nullptr);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float total = 0;
  cudaEventElapsedTime(&total, e0, e1);
  const double ms = total / 5;
  const double flops = 2.0 * n * (n + 1.0) / 2 * heads * (nope + rope + v);
  std::printf("[gpu-bench] mla_prefill %d tokens, %d heads: %.3f ms, %.0f GFLOP/s\n", n, heads, ms,
              flops / (ms * 1e-3) / 1e9);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (void* p : {static_cast<void*>(d_q), static_cast<void*>(d_kv), static_cast<void*>(d_lat),
                  static_cast<void*>(d_out)})
    cudaFree(p);
  EXPECT_GT(ms, 0.0);
}

}  // namespace
}  // namespace tandem::engine::cuda
