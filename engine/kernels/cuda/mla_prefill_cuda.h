#pragma once
// Expanded (prefill) MLA attention on CUDA (issue 21 item 3): the CPU kernel's contract
// (engine/kernels/cpu/mla_prefill.h) on device buffers. A request's new tokens' queries over its
// context's expanded keys and values (kv_b_proj's output) and the latent rows' shared rotary part,
// causal, with an optional DSA mask row per query (GLM). Host entry point only.
//
// A first, plain version: a block per (query, head), a warp per key for the scores, the keys in
// chunks of 128 folded into a running (max, sum), the output's dimensions over the block's
// threads. Each block reads its keys and values itself (no reuse across the queries of a head),
// so it is not tuned; parity with the CPU oracle: mla_prefill_cuda_test.cc (label gpu).

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tandem::engine::cuda {

// Device pointers, laid out as kernels::cpu::MlaPrefillInput's.
struct MlaPrefillDeviceInput {
  const float* q = nullptr;       // [num_new, heads, nope + rope]
  const float* kv = nullptr;      // [past + num_new, heads, nope + v]
  const float* k_rope = nullptr;  // key j's [rope] at k_rope + j · k_rope_stride
  int64_t k_rope_stride = 0;
  int past = 0;
  int num_new = 0;
  const uint8_t* mask = nullptr;  // null, or [num_new, past + num_new] 0/1
};

// Largest value width and query width (nope + rope) a launch takes.
inline constexpr int kMlaPrefillMaxV = 256;
inline constexpr int kMlaPrefillMaxQk = 1024;

// d_out [num_new, heads, v] fp32; a query that sees no key gets zeros. cudaErrorInvalidValue for
// shapes out of range (v or nope + rope too wide, nothing to do is fine). Asynchronous on `stream`.
cudaError_t LaunchMlaPrefill(const MlaPrefillDeviceInput& in, int heads, int nope, int rope, int v,
                             float scale, float* d_out, cudaStream_t stream);

}  // namespace tandem::engine::cuda
