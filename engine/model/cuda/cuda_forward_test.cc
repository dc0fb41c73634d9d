// GPU test (label `gpu`): the whole forward pass through the CUDA kernels. The staging CUDA backend
// (engine/kernels/cuda/cuda_backend.h) runs INT4 Linears, the expanded MLA prefill core and the
// absorbed MLA decode core on the device; its logits must be the CPU backend's within kCudaNmse per
// step on both architectures and both KV dtypes, over a prompt and single-sequence decode steps
// (the split decode path, which takes MlaDecode), with each kind of device op counted as run.
// GLM runs without its DSA indexer, as in forward_test.cc's oracle test (a near-tie in its top-k
// flips a key; and the device decode has no masks). Skips when the machine has no CUDA device.
#include <cstdio>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cuda/cuda_test_support.h"
#include "engine/kernels/cpu/isa_test_support.h"
#include "engine/kernels/cuda/cuda_backend.h"
#include "engine/model/forward.h"
#include "engine/model/presets.h"
#include "engine/runtime/serving_engine.h"

namespace tandem::engine::model {
namespace {

// fp32 device kernels against fp32 CPU kernels through a whole forward pass (the CPU kernels against
// their double oracles measured <= 7.5e-8).
constexpr double kCudaNmse = 1e-6;

using CudaForwardTest = cuda::CudaDeviceTest;

std::vector<int32_t> Tokens(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((seed * 131 + i * 37 + i * i * 11) % 1000);
  return t;
}

TEST_F(CudaForwardTest, StagingBackendGivesTheCpuLogits) {
  for (const char* preset : {"tiny", "tiny-glm"}) {
    for (KvCacheDtype dtype : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
      const ModelConfig config = Preset(preset).value();
      runtime::ServingConfig sc;
      sc.dummy_config = &config;
      sc.weights = WeightFormat::kInt4Group32;
      sc.dummy_seed = 7;
      sc.kv_dtype = dtype;
      sc.page_tokens = 4;
      sc.kv_tokens = 64 * 4;
      sc.threads = 2;
      // Two engines: the CPU run and the CUDA run each fill their own pages.
      std::unique_ptr<runtime::ServingEngine> cpu_engine = runtime::ServingEngine::Open(sc).value();
      std::unique_ptr<runtime::ServingEngine> gpu_engine = runtime::ServingEngine::Open(sc).value();
      ThreadPool pool(2);
      StatusOr<std::unique_ptr<cuda::StagingCudaBackend>> made = cuda::StagingCudaBackend::Create(&pool);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      const cuda::StagingCudaBackend& gpu = **made;
      KvSequence a, b;
      kv::PageId next_a = 0, next_b = 0;
      const std::vector<std::vector<int32_t>> steps = {Tokens(37, 3), {9}, {401}, {77}};
      for (size_t i = 0; i < steps.size(); ++i) {
        ModelRunner& cpu_runner = cpu_engine->runner();
        ModelRunner& gpu_runner = gpu_engine->runner();
        const int64_t n = static_cast<int64_t>(steps[i].size());
        while (static_cast<int64_t>(a.pages.size()) < cpu_runner.PagesNeeded(a, n))
          a.pages.push_back(next_a++);
        while (static_cast<int64_t>(b.pages.size()) < gpu_runner.PagesNeeded(b, n))
          b.pages.push_back(next_b++);
        ForwardOptions options;
        options.use_indexer = false;
        std::vector<float> want, got;
        const StepInput in_a[] = {{&a, steps[i]}};
        const StepInput in_b[] = {{&b, steps[i]}};
        ASSERT_TRUE(cpu_runner.Forward(in_a, options, &want).ok());
        options.backend = &gpu;
        const Status run = gpu_runner.Forward(in_b, options, &got);
        ASSERT_TRUE(run.ok()) << run.ToString();
        ASSERT_TRUE(gpu.device_status().ok()) << gpu.device_status().ToString();
        const double nmse = kernels::cpu::Nmse(got, want);
        std::printf("[cuda-forward] %s %s step %zu: NMSE %.2e\n", preset,
                    dtype == KvCacheDtype::kBf16 ? "bf16-kv" : "fp8-kv", i, nmse);
        EXPECT_LE(nmse, kCudaNmse) << preset << " step " << i;
      }
      EXPECT_GT(gpu.device_matmuls(), 0) << preset;
      EXPECT_GT(gpu.device_prefills(), 0) << preset;
      EXPECT_GT(gpu.device_decodes(), 0) << preset;
    }
  }
}

}  // namespace
}  // namespace tandem::engine::model
