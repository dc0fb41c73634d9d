// GPU test (label `gpu`): the CUDA conversions equal their CPU twins bit for bit.
// Skips, rather than fails, when the machine has no usable CUDA device.
#include "engine/formats/cuda/convert_cuda.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cuda/cuda_test_support.h"
#include "engine/formats/convert.h"

namespace tandem::engine::cuda {
namespace {

using ConvertCudaTest = CudaDeviceTest;

TEST_F(ConvertCudaTest, Bf16ToFp8EveryInputCode) {
  std::vector<uint16_t> in(65536);
  for (uint32_t c = 0; c < 65536; ++c) in[c] = static_cast<uint16_t>(c);
  for (float inv_scale : {1.0f, 37.5f, 0.125f}) {
    std::vector<uint8_t> want(in.size()), got(in.size());
    ConvertBf16ToFp8E4M3Ref(in.data(), want.data(), in.size(), inv_scale);
    uint16_t* d_in = DeviceCopy(in);
    uint8_t* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), got.size()), cudaSuccess);
    ASSERT_EQ(LaunchConvertBf16ToFp8E4M3(d_in, d_out, in.size(), inv_scale, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_in);
    cudaFree(d_out);
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "code " << i << " inv_scale " << inv_scale;
  }
}

TEST_F(ConvertCudaTest, Fp8ToBf16EveryInputCodeAndAwkwardSizes) {
  for (size_t n : {size_t{1}, size_t{17}, size_t{97}, size_t{256}, size_t{100003}}) {
    std::vector<uint8_t> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 131 + 7);
    std::vector<uint16_t> want(n), got(n);
    ConvertFp8E4M3ToBf16Ref(in.data(), want.data(), n, 0.0171f);
    uint8_t* d_in = DeviceCopy(in);
    uint16_t* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), n * sizeof(uint16_t)), cudaSuccess);
    ASSERT_EQ(LaunchConvertFp8E4M3ToBf16(d_in, d_out, n, 0.0171f, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, n * sizeof(uint16_t), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_in);
    cudaFree(d_out);
    // NaN codes decode to NaN on both sides; compare everything else exactly.
    for (size_t i = 0; i < n; ++i) {
      if ((in[i] & 0x7f) == 0x7f) continue;
      ASSERT_EQ(got[i], want[i]) << "n=" << n << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace tandem::engine::cuda
