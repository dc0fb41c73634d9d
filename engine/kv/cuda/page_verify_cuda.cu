#include "engine/kv/cuda/page_verify_cuda.h"

namespace tandem::engine::cuda {
namespace {

constexpr int kThreads = 256;

// One check per thread (grid-stride). Failing threads store the same 1s, so the races are benign;
// a step's checks (batch 64 × 128 pages at 8K context and 64-token pages: 8,192) fit one wave.
__global__ void VerifyPagesKernel(const kv::PageCheck* __restrict__ checks, size_t n,
                                  const uint64_t* __restrict__ generation,
                                  const uint32_t* __restrict__ transfer_tag, size_t num_pages,
                                  uint8_t* __restrict__ item_failed, uint32_t* __restrict__ any_failed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const kv::PageCheck c = checks[i];
    if (kv::PageCheckFails(c, generation, transfer_tag, num_pages)) {
      item_failed[c.item] = 1;
      *any_failed = 1;
    }
  }
}

}  // namespace

cudaError_t LaunchVerifyPages(const kv::PageCheck* d_checks, size_t n, const uint64_t* d_generation,
                              const uint32_t* d_transfer_tag, size_t num_pages, uint8_t* d_item_failed,
                              uint32_t* d_any_failed, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(d_any_failed, 0, sizeof(uint32_t), stream);
  if (err != cudaSuccess || n == 0) return err;
  const size_t blocks = (n + kThreads - 1) / kThreads;
  VerifyPagesKernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      d_checks, n, d_generation, d_transfer_tag, num_pages, d_item_failed, d_any_failed);
  return cudaGetLastError();
}

}  // namespace tandem::engine::cuda
