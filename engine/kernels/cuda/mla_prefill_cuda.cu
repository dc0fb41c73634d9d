#include <cmath>

#include "engine/kernels/cuda/mla_prefill_cuda.h"

namespace tandem::engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 128;  // keys scored per pass, held in shared memory

// Every thread gets the block's maximum / sum of `x`. `red` holds kWarps floats.
__device__ float BlockMax(float x, float* red) {
  for (int off = 16; off > 0; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float m = red[0];
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, red[w]);
  __syncthreads();  // red is reused
  return m;
}

__device__ float BlockSum(float x, float* red) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  __syncthreads();
  return s;
}

// Block (query i, head h). Thread t owns the output dimensions t and t + kThreads.
__global__ void __launch_bounds__(kThreads)
    MlaPrefillKernel(MlaPrefillDeviceInput in, int heads, int nope, int rope, int vdim, float scale,
                     float* __restrict__ out) {
  extern __shared__ float smem[];
  __shared__ float red[kWarps];
  const int i = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int qk = nope + rope, per_head = nope + vdim, context = in.past + in.num_new;
  float* q_s = smem;       // [qk]
  float* p_s = smem + qk;  // [kChunk]: scores, then their exponentials
  const float* q = in.q + (static_cast<int64_t>(i) * heads + h) * qk;
  for (int d = tid; d < qk; d += kThreads) q_s[d] = q[d];
  __syncthreads();
  const uint8_t* mask = in.mask == nullptr ? nullptr : in.mask + static_cast<int64_t>(i) * context;
  const int visible = in.past + i + 1;                  // causal: keys [0, visible)
  float m = -INFINITY, l = 0.0f, o0 = 0.0f, o1 = 0.0f;  // m and l the same in every thread
  for (int c0 = 0; c0 < visible; c0 += kChunk) {
    const int n = min(kChunk, visible - c0);
    for (int t = warp; t < n; t += kWarps) {
      const int j = c0 + t;
      float s = -INFINITY;
      if (mask == nullptr || mask[j] != 0) {  // the same for the whole warp
        const float* k = in.kv + (static_cast<int64_t>(j) * heads + h) * per_head;
        const float* kr = in.k_rope + static_cast<int64_t>(j) * in.k_rope_stride;
        float acc = 0.0f;
        for (int d = lane; d < nope; d += 32) acc = fmaf(q_s[d], k[d], acc);
        for (int d = lane; d < rope; d += 32) acc = fmaf(q_s[nope + d], kr[d], acc);
        for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        s = acc * scale;
      }
      if (lane == 0) p_s[t] = s;
    }
    __syncthreads();
    float chunk_max = -INFINITY;
    for (int t = tid; t < n; t += kThreads) chunk_max = fmaxf(chunk_max, p_s[t]);
    chunk_max = BlockMax(chunk_max, red);
    if (chunk_max == -INFINITY) continue;  // sees none of this chunk (uniform over the block)
    const float m_new = fmaxf(m, chunk_max);
    const float c = expf(m - m_new);  // 0 while nothing was summed (m = -inf)
    l *= c;
    o0 *= c;
    o1 *= c;
    m = m_new;
    float part = 0.0f;
    for (int t = tid; t < n; t += kThreads) {
      const float e = p_s[t] == -INFINITY ? 0.0f : expf(p_s[t] - m);
      p_s[t] = e;
      part += e;
    }
    l += BlockSum(part, red);  // its barriers also publish p_s
    for (int t = 0; t < n; ++t) {
      const float e = p_s[t];
      if (e == 0.0f) continue;
      const float* v = in.kv + (static_cast<int64_t>(c0 + t) * heads + h) * per_head + nope;
      if (tid < vdim) o0 = fmaf(e, v[tid], o0);
      if (tid + kThreads < vdim) o1 = fmaf(e, v[tid + kThreads], o1);
    }
    __syncthreads();  // before the next chunk's scores overwrite p_s
  }
  float* dst = out + (static_cast<int64_t>(i) * heads + h) * vdim;
  if (tid < vdim) dst[tid] = l > 0.0f ? o0 / l : 0.0f;
  if (tid + kThreads < vdim) dst[tid + kThreads] = l > 0.0f ? o1 / l : 0.0f;
}

}  // namespace

cudaError_t LaunchMlaPrefill(const MlaPrefillDeviceInput& in, int heads, int nope, int rope, int v,
                             float scale, float* d_out, cudaStream_t stream) {
  if (heads < 0 || nope < 0 || rope < 0 || v < 0 || in.past < 0 || in.num_new < 0 || v > kMlaPrefillMaxV ||
      nope + rope > kMlaPrefillMaxQk || heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (in.num_new == 0 || heads == 0 || v == 0) return cudaSuccess;
  const size_t shared = sizeof(float) * (nope + rope + kChunk);
  MlaPrefillKernel<<<dim3(in.num_new, heads), kThreads, shared, stream>>>(in, heads, nope, rope, v, scale,
                                                                          d_out);
  return cudaGetLastError();
}

}  // namespace tandem::engine::cuda
