#pragma once
// Paged MLA decode attention on CUDA (issue 21 item 3): the absorbed form's attention for one new
// token per request over its cached latent rows, read in place from the KV pages in BF16 or FP8
// e4m3 (the per-layer scale folded into the softmax scale and the output, as the CPU kernels do:
// engine/kernels/cpu/attention.h), batched over requests of different lengths and split over long
// contexts (flash-decoding: per-split partials, then a combine). Host entry points only.
//
// Not yet: DSA top-k masks (GLM's sparse layers), several new tokens per request (speculative or
// chunked decode). Parity with the CPU kernels: mla_decode_cuda_test.cc (label gpu).

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tandem::engine::cuda {

// One layer's latent rows in a device copy of the page pool (engine/kv/page_pool.h layout): row t
// of a request is at pages + page_table[t / page_tokens] · page_stride + layer_offset +
// (t % page_tokens) · width · (fp8 ? 1 : 2).
struct PagedLatent {
  const uint8_t* pages = nullptr;
  int64_t page_stride = 0;   // bytes
  int64_t layer_offset = 0;  // bytes
  int page_tokens = 0;
  int width = 0;     // kv_lora + rope (576 in the real models)
  bool fp8 = false;  // e4m3 codes (value = code · kv_scale), else bf16
  float kv_scale = 1.0f;
};

// Device workspace the launch needs (the split partials).
size_t MlaDecodeWorkspaceBytes(int batch, int heads, int kv_lora, int max_context);

// d_q: [batch, heads, width] fp32 (per head [W_UKᵀ q_nope | q_rope], laid out like a cached row);
// d_page_table: [batch, max_pages] int32 page ids; d_context: [batch] int32 rows each request
// attends to (>= 1, <= max_context); d_out: [batch, heads, kv_lora] fp32 =
// Σ_t softmax_t(softmax_scale · q·row_t) · row_t[0, kv_lora), the rows' values including their
// scale. Asynchronous on `stream`.
cudaError_t LaunchMlaDecode(const float* d_q, int batch, int heads, const int32_t* d_page_table,
                            int max_pages, const int32_t* d_context, int max_context, const PagedLatent& kv,
                            int kv_lora, float softmax_scale, float* d_out, void* d_workspace,
                            cudaStream_t stream);

}  // namespace tandem::engine::cuda
