#pragma once
// Which accelerators this build can use: answered by the CUDA backend when it is compiled in,
// by a CPU-only twin otherwise. Callers never include CUDA headers.

#include <string>
#include <vector>

namespace tandem::engine {

struct AcceleratorInfo {
  bool cuda_compiled = false;  // this binary carries CUDA kernels
  std::string cuda_targets;    // e.g. "sm_90a + compute_90a PTX"
  int cuda_devices = 0;        // usable devices now (0 without a driver or GPU)
  std::string cuda_error;      // why there are none, when the runtime says so
  std::vector<std::string> device_names;
};

AcceleratorInfo QueryAccelerators();

}  // namespace tandem::engine
