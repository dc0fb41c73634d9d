#include <cuda_runtime_api.h>

#include "engine/core/accelerator.h"

namespace tandem::engine {

AcceleratorInfo QueryAccelerators() {
  AcceleratorInfo info;
  info.cuda_compiled = true;
  info.cuda_targets = "sm_90a + compute_90a PTX";
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.cuda_error = cudaGetErrorString(err);
    return info;
  }
  info.cuda_devices = count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) info.device_names.emplace_back(prop.name);
  }
  return info;
}

}  // namespace tandem::engine
