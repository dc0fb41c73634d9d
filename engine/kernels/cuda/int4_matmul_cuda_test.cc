// GPU test (label `gpu`): W4A16 INT4 matmul on CUDA against MatmulRef, the CPU kernels' double
// oracle straight from checkpoint layout. The device gets the weight as the CPU kernels pack it
// (PackedWeight::FromInt4), so the load path is the one the engine uses. Odd sizes (1, 17, 97 rows
// and columns, K not a multiple of 32), batches 1 to 64 (past one tile of 8), strided and
// misaligned activation rows, strided outputs poisoned before the launch with their padding
// checked untouched, fresh random inputs each run (the seed is printed). Then the batch-1
// bandwidth at the expert and dense shapes against a device-to-device copy, and batches 8 and 64.
// Skips, rather than fails, when the machine has no usable CUDA device.
#include "engine/kernels/cuda/int4_matmul_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cuda/cuda_test_support.h"
#include "engine/formats/weights.h"
#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::cuda {
namespace {

// fp32 products and sums on the GPU (fused, reordered) against double accumulation.
constexpr double kNmseInt4Cuda = 1e-9;

using Int4MatmulCudaTest = CudaDeviceTest;

// A random weight quantized as a checkpoint holds it, and its load-time packing.
struct Weight {
  int64_t rows, cols;
  std::vector<int32_t> packed;
  std::vector<uint16_t> scale;
  kernels::cpu::PackedWeight cpu;
  Int4GroupWeightView View() const { return {packed.data(), scale.data(), rows, cols}; }
};

Weight MakeWeight(int64_t rows, int64_t cols, std::mt19937& rng) {
  Weight w{rows,
           cols,
           std::vector<int32_t>(rows * Int4PackedCols(cols)),
           std::vector<uint16_t>(rows * Int4ScaleCols(cols)),
           {}};
  std::vector<float> dense(static_cast<size_t>(rows * cols));
  std::normal_distribution<float> g(0.0f, 0.05f);
  for (float& v : dense) v = g(rng);
  QuantizeInt4Group32Ref(dense.data(), rows, cols, w.packed.data(), w.scale.data());
  StatusOr<kernels::cpu::PackedWeight> p = kernels::cpu::PackedWeight::FromInt4(w.View());
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  w.cpu = std::move(*p);
  return w;
}

struct DeviceWeight {
  uint8_t* nibbles = nullptr;
  uint16_t* scales = nullptr;
  Int4DeviceWeight view;
  int64_t Bytes() const { return view.rows * ((view.cols + 31) / 32) * (16 + 2); }
};

DeviceWeight Upload(const kernels::cpu::PackedWeight& w) {
  DeviceWeight d;
  const size_t groups = static_cast<size_t>(w.rows() * w.groups());
  d.nibbles = DeviceCopy(w.int4(), groups * 16);
  d.scales = DeviceCopy(w.int4_scale(), groups);
  d.view = {d.nibbles, d.scales, w.rows(), w.cols()};
  return d;
}

void Free(DeviceWeight& d) {
  cudaFree(d.nibbles);
  cudaFree(d.scales);
}

// One case: y = x · Wᵀ for m rows of x laid `x_pad` floats past K apart (starting `x_shift` floats
// into the buffer: 1 makes the rows misaligned for float4), y rows N + 3 apart.
void Check(const Weight& w, int m, int64_t x_pad, int64_t x_shift, std::mt19937& rng) {
  const int64_t n = w.rows, k = w.cols, x_stride = k + x_pad, y_stride = n + 3;
  std::vector<float> x(static_cast<size_t>(m * k));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (float& v : x) v = g(rng);
  std::vector<float> want(static_cast<size_t>(m * n));
  kernels::cpu::MatmulRef(w.View(), x.data(), m, want.data());

  std::vector<float> x_host(static_cast<size_t>(x_shift + m * x_stride),
                            std::numeric_limits<float>::quiet_NaN());
  for (int b = 0; b < m; ++b) std::memcpy(&x_host[x_shift + b * x_stride], &x[b * k], sizeof(float) * k);
  float* d_x = DeviceCopy(x_host);
  std::vector<float> got(static_cast<size_t>(m * y_stride), std::numeric_limits<float>::quiet_NaN());
  float* d_y = DeviceCopy(got);  // poisoned
  DeviceWeight d = Upload(w.cpu);
  ASSERT_EQ(LaunchInt4Matmul(d.view, d_x + x_shift, x_stride, m, d_y, y_stride, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), d_y, sizeof(float) * got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  Free(d);
  cudaFree(d_x);
  cudaFree(d_y);

  double err = 0, norm = 0;
  for (int b = 0; b < m; ++b) {
    for (int64_t i = 0; i < y_stride; ++i) {
      const float v = got[b * y_stride + i];
      if (i >= n) {
        ASSERT_TRUE(std::isnan(v)) << "padding at row " << b << " col " << i << " written";
        continue;
      }
      ASSERT_TRUE(std::isfinite(v)) << "output " << b << "," << i << " not written";
      const double ref = want[b * n + i];
      err += (v - ref) * (v - ref);
      norm += ref * ref;
    }
  }
  EXPECT_LE(err / norm, kNmseInt4Cuda)
      << "N " << n << " K " << k << " m " << m << " x_pad " << x_pad << " x_shift " << x_shift;
}

TEST_F(Int4MatmulCudaTest, MatchesTheCpuOracleAtOddSizesBatchesAndStrides) {
  const uint32_t seed = std::random_device{}();
  std::printf("[int4-matmul] seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int64_t n : {1, 17, 97, 515}) {
    for (int64_t k : {1, 17, 97, 256, 1000, 4096}) {
      const Weight w = MakeWeight(n, k, rng);
      for (int m : {1, 2, 3, 8, 9, 17, 64}) Check(w, m, 0, 0, rng);
      Check(w, 5, 4, 0, rng);  // strided, still aligned when K is
      Check(w, 3, 1, 1, rng);  // misaligned rows: the scalar loads
    }
  }
}

TEST_F(Int4MatmulCudaTest, BadShapesAreRefused) {
  std::mt19937 rng(3);
  const Weight w = MakeWeight(8, 64, rng);
  DeviceWeight d = Upload(w.cpu);
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), sizeof(float) * 1024), cudaSuccess);
  EXPECT_EQ(LaunchInt4Matmul(d.view, buf, 64, 0, buf, 8, nullptr), cudaErrorInvalidValue);  // m = 0
  EXPECT_EQ(LaunchInt4Matmul(d.view, buf, 63, 1, buf, 8, nullptr), cudaErrorInvalidValue);  // x_stride < K
  EXPECT_EQ(LaunchInt4Matmul(d.view, buf, 64, 1, buf, 7, nullptr), cudaErrorInvalidValue);  // y_stride < N
  EXPECT_EQ(LaunchInt4Matmul(d.view, nullptr, 64, 1, buf, 8, nullptr), cudaErrorInvalidValue);
  Int4DeviceWeight empty = d.view;
  empty.rows = 0;
  EXPECT_EQ(LaunchInt4Matmul(empty, buf, 64, 1, buf, 8, nullptr), cudaErrorInvalidValue);
  cudaFree(buf);
  Free(d);
}

// Batch 1 at Kimi K2.x's expert shapes (N x K: 2048 x 7168 gate/up, 7168 x 2048 down) and its
// dense MLP's down projection (7168 x 18432): weight bytes (nibbles + scales) read per second
// against a device-to-device copy's (read + write counted). Each launch reads another copy of the
// weight, so the weights cycle through ~4x the L2 and come from HBM; the launches are replayed
// from a CUDA graph, so the figure is per launch including the gaps between graph nodes.
TEST_F(Int4MatmulCudaTest, BandwidthAtBatch1OnExpertAndDenseShapes) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const double copy_gbs = CopyBandwidthGbs();
  ASSERT_GT(copy_gbs, 0.0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);

  std::mt19937 rng(11);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int64_t shapes[][2] = {{2048, 7168}, {7168, 2048}, {7168, 18432}};
  for (const auto& shape : shapes) {
    const Weight w = MakeWeight(shape[0], shape[1], rng);
    DeviceWeight first = Upload(w.cpu);
    const int copies = static_cast<int>(std::max<int64_t>(
        2, (4 * static_cast<int64_t>(prop.l2CacheSize) + first.Bytes() - 1) / first.Bytes()));
    std::vector<DeviceWeight> weights = {first};
    for (int c = 1; c < copies; ++c) weights.push_back(Upload(w.cpu));
    const int max_m = 64;
    std::vector<float> x(static_cast<size_t>(max_m * shape[1]), 0.01f);
    float* d_x = DeviceCopy(x);
    float* d_y = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_y), sizeof(float) * max_m * shape[0]), cudaSuccess);
    for (int m : {1, 8, 64}) {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      for (const DeviceWeight& d : weights) LaunchInt4Matmul(d.view, d_x, shape[1], m, d_y, shape[0], stream);
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);  // warm-up
      const int reps = 10;
      cudaEventRecord(e0, stream);
      for (int r = 0; r < reps; ++r) cudaGraphLaunch(exec, stream);
      cudaEventRecord(e1, stream);
      ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
      float total = 0;
      cudaEventElapsedTime(&total, e0, e1);
      const double us = 1e3 * total / (reps * copies);
      const double gbs = first.Bytes() / (us * 1e-6) / 1e9;
      std::printf(
          "[gpu-bench] int4_matmul N %lld K %lld batch %d: %.2f us, weights %.0f GB/s = %.0f%% of copy %.0f "
          "GB/s"
          "%s\n",
          static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), m, us, gbs,
          100.0 * gbs / copy_gbs, copy_gbs, m == 1 ? " (target >= 75%)" : "");
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      EXPECT_GT(us, 0.0);
    }
    for (DeviceWeight& d : weights) Free(d);
    cudaFree(d_x);
    cudaFree(d_y);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tandem::engine::cuda
