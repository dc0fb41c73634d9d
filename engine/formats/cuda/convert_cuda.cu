#include "engine/formats/cuda/convert_cuda.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops: any n works with a capped grid.
__global__ void Bf16ToFp8E4M3Kernel(const uint16_t* __restrict__ in, uint8_t* __restrict__ out, size_t n,
                                    float inv_scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = FloatToFp8E4M3(Bf16ToFloat(in[i]) * inv_scale);
  }
}

__global__ void Fp8E4M3ToBf16Kernel(const uint8_t* __restrict__ in, uint16_t* __restrict__ out, size_t n,
                                    float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = FloatToBf16(Fp8E4M3ToFloat(in[i]) * scale);
  }
}

unsigned GridFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks == 0 ? 1 : blocks) : 65535);
}

}  // namespace

cudaError_t LaunchConvertBf16ToFp8E4M3(const uint16_t* d_in, uint8_t* d_out, size_t n, float inv_scale,
                                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Bf16ToFp8E4M3Kernel<<<GridFor(n), kThreads, 0, stream>>>(d_in, d_out, n, inv_scale);
  return cudaGetLastError();
}

cudaError_t LaunchConvertFp8E4M3ToBf16(const uint8_t* d_in, uint16_t* d_out, size_t n, float scale,
                                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Fp8E4M3ToBf16Kernel<<<GridFor(n), kThreads, 0, stream>>>(d_in, d_out, n, scale);
  return cudaGetLastError();
}

}  // namespace tandem::engine::cuda
