#pragma once
// W4A16 INT4 matmul on CUDA (issue 21 item 3): y[m, N] = x[m, K] · Wᵀ for decode batches, over the
// weight exactly as the CPU kernels hold it after load (kernels::cpu::PackedWeight's int4 layout,
// copied to the device as is): nibbles [N, G, 16] bytes, G = ceil(K/32), byte i of a group holding
// element i in its low nibble and element i+16 in its high nibble as q + 8 (padding q = 0), and
// bf16 group scales [N, G]. Activations and outputs fp32, accumulation fp32.
//
// One launch streams the weights once per tile of 8 batch rows: a block owns 4 weight rows and
// splits their groups over up to 256 threads (fewer when K is short, so that short-K shapes still
// give every SM blocks), each thread decodes its groups' nibbles once per batch row and keeps the
// 4 x tile partial sums in registers; warp shuffles and shared memory reduce them.
//
// Not yet: a tensor-core path for batches past 8 (a batch of 64 reads the weights 8 times, from L2
// where they fit); measured only where an H100/H200 ran scripts/gpu-check.sh (docs/performance.md).
// Parity with MatmulRef (the CPU's double oracle): int4_matmul_cuda_test.cc (label gpu).

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tandem::engine::cuda {

// Batch rows one pass over the weights serves; larger batches take ceil(m / 8) passes.
constexpr int kInt4MatmulBatchTile = 8;

struct Int4DeviceWeight {
  const uint8_t* nibbles = nullptr;  // [rows, groups, 16]
  const uint16_t* scales = nullptr;  // [rows, groups] bf16
  int64_t rows = 0;                  // N
  int64_t cols = 0;                  // K
};

// d_x: [m, K] fp32, rows `x_stride` floats apart (>= K); d_y: [m, N] fp32, rows `y_stride` apart
// (>= N). m >= 1. Asynchronous on `stream`; cudaErrorInvalidValue for bad shapes.
cudaError_t LaunchInt4Matmul(const Int4DeviceWeight& w, const float* d_x, int64_t x_stride, int m, float* d_y,
                             int64_t y_stride, cudaStream_t stream);

}  // namespace tandem::engine::cuda
