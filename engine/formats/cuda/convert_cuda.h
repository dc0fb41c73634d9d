#pragma once
// CUDA twins of engine/formats/convert.h. Host entry points only; kernels stay in the .cu file.
// Errors come back as cudaError_t and are turned into Status by the caller (the backend edge).

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tandem::engine::cuda {

// d_in: [n] bf16 bits, d_out: [n] fp8 e4m3 codes, both device memory. Asynchronous on `stream`.
cudaError_t LaunchConvertBf16ToFp8E4M3(const uint16_t* d_in, uint8_t* d_out, size_t n, float inv_scale,
                                       cudaStream_t stream);

// d_in: [n] fp8 e4m3 codes, d_out: [n] bf16 bits, both device memory. Asynchronous on `stream`.
cudaError_t LaunchConvertFp8E4M3ToBf16(const uint8_t* d_in, uint16_t* d_out, size_t n, float scale,
                                       cudaStream_t stream);

}  // namespace tandem::engine::cuda
