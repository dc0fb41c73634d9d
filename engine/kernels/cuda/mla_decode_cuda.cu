#include <cfloat>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cuda/mla_decode_cuda.h"

namespace tandem::engine::cuda {
namespace {

constexpr int kChunk = 256;  // context rows per split
constexpr int kHeads = 8;    // heads per block: each row is read once for all of them
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ inline const uint8_t* Row(const PagedLatent& kv, const int32_t* table, int t) {
  const int32_t page = table[t / kv.page_tokens];
  return kv.pages + page * kv.page_stride + kv.layer_offset +
         static_cast<int64_t>(t % kv.page_tokens) * kv.width * (kv.fp8 ? 1 : 2);
}

// The element's value without the layer scale (exact).
__device__ inline float Value(const uint8_t* row, int d, bool fp8) {
  if (fp8) return Fp8E4M3ToFloat(row[d]);
  return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[d]) << 16);
}

// Block (request b, head group, split): scores of the group's heads over the split's rows (a warp
// per row, lanes over the row's elements), their exponentials against the split's maximum, and the
// unnormalized sums Σ e_t row_t[0, kv_lora) (a thread per element). Partial layout per (b, h,
// split): [kv_lora sums | m | l].
__global__ void __launch_bounds__(kThreads)
    MlaDecodePartials(const float* __restrict__ q, int heads, const int32_t* __restrict__ page_table,
                      int max_pages, const int32_t* __restrict__ context, PagedLatent kv, int kv_lora,
                      float score_scale, int splits, float* __restrict__ partials) {
  extern __shared__ float smem[];
  const int b = blockIdx.x, h0 = blockIdx.y * kHeads, split = blockIdx.z;
  const int nh = min(kHeads, heads - h0);
  const int width = kv.width, ctx = context[b];
  const int t0 = split * kChunk, n = max(0, min(ctx, t0 + kChunk) - t0);
  const int part_size = kv_lora + 2;
  float* q_s = smem;                   // [kHeads, width]
  float* s_s = smem + kHeads * width;  // [kHeads, kChunk]
  const int32_t* table = page_table + static_cast<int64_t>(b) * max_pages;
  for (int i = threadIdx.x; i < nh * width; i += kThreads)
    q_s[i] = q[(static_cast<int64_t>(b) * heads + h0) * width + i];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = warp; t < n; t += kWarps) {
    const uint8_t* row = Row(kv, table, t0 + t);
    float acc[kHeads];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) acc[h] = 0.0f;
    for (int d = lane; d < width; d += 32) {
      const float v = Value(row, d, kv.fp8);
#pragma unroll
      for (int h = 0; h < kHeads; ++h)
        if (h < nh) acc[h] = fmaf(q_s[h * width + d], v, acc[h]);
    }
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      float s = acc[h];
      for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0 && h < nh) s_s[h * kChunk + t] = s * score_scale;
    }
  }
  __syncthreads();
  // Per head (a warp each): the split's maximum m, e_t = exp(s_t - m) in place, l = Σ e_t.
  __shared__ float m_s[kHeads], l_s[kHeads];
  for (int h = warp; h < nh; h += kWarps) {
    float m = -FLT_MAX;
    for (int t = lane; t < n; t += 32) m = fmaxf(m, s_s[h * kChunk + t]);
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.0f;
    for (int t = lane; t < n; t += 32) {
      const float e = expf(s_s[h * kChunk + t] - m);
      s_s[h * kChunk + t] = e;
      l += e;
    }
    for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) {
      m_s[h] = m;
      l_s[h] = l;  // 0 for an empty split
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < kv_lora; d += kThreads) {
    float acc[kHeads];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) acc[h] = 0.0f;
    for (int t = 0; t < n; ++t) {
      const float v = Value(Row(kv, table, t0 + t), d, kv.fp8);
#pragma unroll
      for (int h = 0; h < kHeads; ++h)
        if (h < nh) acc[h] = fmaf(s_s[h * kChunk + t], v, acc[h]);
    }
    for (int h = 0; h < nh; ++h)
      partials[((static_cast<int64_t>(b) * heads + h0 + h) * splits + split) * part_size + d] = acc[h];
  }
  if (threadIdx.x < nh) {
    float* p = partials + ((static_cast<int64_t>(b) * heads + h0 + threadIdx.x) * splits + split) * part_size;
    p[kv_lora] = n > 0 ? m_s[threadIdx.x] : -FLT_MAX;
    p[kv_lora + 1] = n > 0 ? l_s[threadIdx.x] : 0.0f;
  }
}

// (b, h) per block: the splits' partials folded against their common maximum, normalized, times
// the layer scale.
__global__ void MlaDecodeCombine(const float* __restrict__ partials, int heads, int splits, int kv_lora,
                                 float kv_scale, float* __restrict__ out) {
  const int b = blockIdx.x, h = blockIdx.y;
  const int part_size = kv_lora + 2;
  const float* p = partials + (static_cast<int64_t>(b) * heads + h) * splits * part_size;
  float m = -FLT_MAX;
  for (int s = 0; s < splits; ++s)
    if (p[s * part_size + kv_lora + 1] > 0.0f) m = fmaxf(m, p[s * part_size + kv_lora]);
  float l = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float ls = p[s * part_size + kv_lora + 1];
    if (ls > 0.0f) l += expf(p[s * part_size + kv_lora] - m) * ls;
  }
  const float inv = l > 0.0f ? kv_scale / l : 0.0f;
  float* o = out + (static_cast<int64_t>(b) * heads + h) * kv_lora;
  for (int d = threadIdx.x; d < kv_lora; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float ls = p[s * part_size + kv_lora + 1];
      if (ls > 0.0f) acc += expf(p[s * part_size + kv_lora] - m) * p[s * part_size + d];
    }
    o[d] = acc * inv;
  }
}

int Splits(int max_context) { return max(1, (max_context + kChunk - 1) / kChunk); }

}  // namespace

size_t MlaDecodeWorkspaceBytes(int batch, int heads, int kv_lora, int max_context) {
  return static_cast<size_t>(batch) * heads * Splits(max_context) * (kv_lora + 2) * sizeof(float);
}

cudaError_t LaunchMlaDecode(const float* d_q, int batch, int heads, const int32_t* d_page_table,
                            int max_pages, const int32_t* d_context, int max_context, const PagedLatent& kv,
                            int kv_lora, float softmax_scale, float* d_out, void* d_workspace,
                            cudaStream_t stream) {
  if (batch <= 0 || heads <= 0) return cudaSuccess;
  if (kv.width <= 0 || kv_lora <= 0 || kv_lora > kv.width || kv.page_tokens <= 0 || max_context <= 0)
    return cudaErrorInvalidValue;
  const int splits = Splits(max_context);
  const size_t smem = (static_cast<size_t>(kHeads) * kv.width + kHeads * kChunk) * sizeof(float);
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(MlaDecodePartials, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  float* partials = static_cast<float*>(d_workspace);
  const dim3 grid(batch, (heads + kHeads - 1) / kHeads, splits);
  MlaDecodePartials<<<grid, kThreads, smem, stream>>>(d_q, heads, d_page_table, max_pages, d_context, kv,
                                                      kv_lora, softmax_scale * kv.kv_scale, splits, partials);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  MlaDecodeCombine<<<dim3(batch, heads), 128, 0, stream>>>(partials, heads, splits, kv_lora, kv.kv_scale,
                                                           d_out);
  return cudaGetLastError();
}

}  // namespace tandem::engine::cuda
