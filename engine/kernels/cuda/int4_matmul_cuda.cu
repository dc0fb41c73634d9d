#include "engine/kernels/cuda/int4_matmul_cuda.h"

namespace tandem::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;  // weight rows per thread (each activation load serves all of them)
constexpr int kGroup = 32;

// A stored nibble (q + 8, 0..15) as the float q: 2^23 + n is exact in fp32, and so is the
// subtraction of 2^23 + 8.
__device__ __forceinline__ float Nibble(uint32_t n) { return __uint_as_float(0x4B000000u | n) - 8388616.0f; }

__device__ __forceinline__ float Bf16(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Σ_i q_i · x_i over one group: word wi of the 16 bytes holds elements 4wi..4wi+3 in its low
// nibbles and 4wi+16..4wi+19 in its high ones.
__device__ __forceinline__ float GroupDot(const uint4& packed, const float (&x)[kGroup]) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
  float lo = 0.0f, hi = 0.0f;
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
#pragma unroll
    for (int bi = 0; bi < 4; ++bi) {
      const int j = wi * 4 + bi;
      lo = fmaf(Nibble((words[wi] >> (8 * bi)) & 0xFu), x[j], lo);
      hi = fmaf(Nibble((words[wi] >> (8 * bi + 4)) & 0xFu), x[j + 16], hi);
    }
  }
  return lo + hi;
}

// Block: kThreads / k_threads row sets of kRows weight rows each; the k_threads threads of a set
// take the set's groups round robin. blockIdx.y: the tile of kB (<= 8) batch rows.
// kVec: K is a multiple of 32 and the activation rows are 16-byte aligned (float4 loads).
template <int kB, bool kVec>
__global__ void __launch_bounds__(kThreads)
    Int4MatmulKernel(const uint8_t* __restrict__ nibbles, const uint16_t* __restrict__ scales, int64_t n_rows,
                     int64_t k_cols, int64_t groups, int k_threads, const float* __restrict__ x,
                     int64_t x_stride, int m, float* __restrict__ y, int64_t y_stride) {
  __shared__ float partial[kThreads / 32][kB][kRows];
  const int set = threadIdx.x / k_threads, kt = threadIdx.x % k_threads;
  const int sets = kThreads / k_threads;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * sets + set) * kRows;
  const int b0 = blockIdx.y * kB;
  const int nb = min(kB, m - b0);

  float acc[kB][kRows];
#pragma unroll
  for (int b = 0; b < kB; ++b)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[b][r] = 0.0f;

  for (int64_t g = kt; g < groups; g += k_threads) {
    uint4 packed[kRows];
    float scale[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t n = row0 + r;
      if (n < n_rows) {
        packed[r] = __ldg(reinterpret_cast<const uint4*>(nibbles + (n * groups + g) * 16));
        scale[r] = Bf16(__ldg(scales + n * groups + g));
      } else {
        packed[r] = make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u);  // q = 0
        scale[r] = 0.0f;
      }
    }
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      if (b >= nb) break;
      const float* xp = x + static_cast<int64_t>(b0 + b) * x_stride + g * kGroup;
      float xv[kGroup];
      if constexpr (kVec) {
#pragma unroll
        for (int i = 0; i < kGroup / 4; ++i) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(xp) + i);
          xv[4 * i] = v.x;
          xv[4 * i + 1] = v.y;
          xv[4 * i + 2] = v.z;
          xv[4 * i + 3] = v.w;
        }
      } else {
        const int64_t left = k_cols - g * kGroup;  // > 0
#pragma unroll
        for (int i = 0; i < kGroup; ++i) xv[i] = i < left ? __ldg(xp + i) : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[b][r] = fmaf(scale[r], GroupDot(packed[r], xv), acc[b][r]);
    }
  }

  // Sum over the set's threads: lanes by shuffles, then the set's warps through shared memory.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int b = 0; b < kB; ++b)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v = acc[b][r];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) partial[warp][b][r] = v;
    }
  __syncthreads();
  const int warps_per_set = k_threads / 32;
  for (int i = threadIdx.x; i < sets * kB * kRows; i += kThreads) {
    const int s = i / (kB * kRows), b = (i / kRows) % kB, r = i % kRows;
    const int64_t n = (static_cast<int64_t>(blockIdx.x) * sets + s) * kRows + r;
    if (b >= nb || n >= n_rows) continue;
    float v = 0.0f;
    for (int w = 0; w < warps_per_set; ++w) v += partial[s * warps_per_set + w][b][r];
    y[static_cast<int64_t>(b0 + b) * y_stride + n] = v;
  }
}

template <int kB>
cudaError_t Launch(const Int4DeviceWeight& w, int64_t groups, int k_threads, bool vec, const float* x,
                   int64_t x_stride, int m, float* y, int64_t y_stride, cudaStream_t stream) {
  const int64_t rows_per_block = static_cast<int64_t>(kThreads / k_threads) * kRows;
  const dim3 grid(static_cast<unsigned>((w.rows + rows_per_block - 1) / rows_per_block),
                  static_cast<unsigned>((m + kB - 1) / kB));
  if (vec) {
    Int4MatmulKernel<kB, true><<<grid, kThreads, 0, stream>>>(w.nibbles, w.scales, w.rows, w.cols, groups,
                                                              k_threads, x, x_stride, m, y, y_stride);
  } else {
    Int4MatmulKernel<kB, false><<<grid, kThreads, 0, stream>>>(w.nibbles, w.scales, w.rows, w.cols, groups,
                                                               k_threads, x, x_stride, m, y, y_stride);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchInt4Matmul(const Int4DeviceWeight& w, const float* d_x, int64_t x_stride, int m, float* d_y,
                             int64_t y_stride, cudaStream_t stream) {
  if (w.nibbles == nullptr || w.scales == nullptr || d_x == nullptr || d_y == nullptr || w.rows < 1 ||
      w.cols < 1 || m < 1 || x_stride < w.cols || y_stride < w.rows) {
    return cudaErrorInvalidValue;
  }
  const int64_t groups = (w.cols + kGroup - 1) / kGroup;
  // As many threads per row set as there are groups to share (a multiple of a warp, at most the
  // block): short rows leave room for more row sets per block, so more blocks run at once.
  int k_threads = 32;
  while (k_threads < kThreads && k_threads < groups) k_threads *= 2;
  const int64_t rows_per_block = static_cast<int64_t>(kThreads / k_threads) * kRows;
  if ((w.rows + rows_per_block - 1) / rows_per_block > 0x7fffffff ||
      (m + kInt4MatmulBatchTile - 1) / kInt4MatmulBatchTile > 65535) {
    return cudaErrorInvalidValue;  // past the grid's limits
  }
  const bool vec = w.cols % kGroup == 0 && x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(d_x) % 16 == 0;
  if (m == 1) return Launch<1>(w, groups, k_threads, vec, d_x, x_stride, m, d_y, y_stride, stream);
  if (m == 2) return Launch<2>(w, groups, k_threads, vec, d_x, x_stride, m, d_y, y_stride, stream);
  if (m <= 4) return Launch<4>(w, groups, k_threads, vec, d_x, x_stride, m, d_y, y_stride, stream);
  return Launch<kInt4MatmulBatchTile>(w, groups, k_threads, vec, d_x, x_stride, m, d_y, y_stride, stream);
}

}  // namespace tandem::engine::cuda
