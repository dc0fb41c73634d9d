#pragma once
// What the CUDA tests (label `gpu`) share: a fixture that skips without a device, host-to-device
// copies, and the device's copy bandwidth, the yardstick of their bandwidth figures.

#include <algorithm>
#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace tandem::engine::cuda {

// Skips, rather than fails, when the machine has no usable CUDA device.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// A new device buffer holding `count` elements of `host` (at least one element allocated); failures
// are test failures.
template <typename T>
T* DeviceCopy(const T* host, size_t count) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), std::max<size_t>(1, count) * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}
template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  return DeviceCopy(host.data(), host.size());
}

// Device-to-device copies of 1 GiB (one warm-up, then 5 timed), bytes read plus bytes written per
// second, in GB/s; 0 when the device cannot hold the two buffers.
inline double CopyBandwidthGbs() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess) return 0;
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    return 0;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e0);
  for (int i = 0; i < 5; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return ms > 0 ? 2.0 * bytes * 5 / (ms * 1e-3) / 1e9 : 0;
}

}  // namespace tandem::engine::cuda
