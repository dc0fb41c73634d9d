#include <cstdio>

#include "engine/core/accelerator.h"
#include "engine/core/cpu_features.h"
#include "tools/commands.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "dev"
#endif

namespace tandem::tools {

int RunVersion(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "usage: tandem version\n");
    return 2;
  }
  const engine::CpuFeatures& cpu = engine::HostCpuFeatures();
  engine::AcceleratorInfo acc = engine::QueryAccelerators();
  std::printf("tandem %s\n", TANDEM_VERSION);
  std::printf("cpu: %d logical cores, features: %s, kernels: %s\n", cpu.logical_cores, cpu.ToString().c_str(),
              cpu.HasAvx2Kernels() ? "avx2+fma+f16c" : "portable");
  if (!acc.cuda_compiled) {
    std::printf("cuda: not compiled in\n");
  } else {
    std::printf("cuda: compiled for %s, %d device(s)%s%s\n", acc.cuda_targets.c_str(), acc.cuda_devices,
                acc.cuda_error.empty() ? "" : ": ", acc.cuda_error.c_str());
    for (const std::string& name : acc.device_names) std::printf("  device: %s\n", name.c_str());
  }
  return 0;
}

}  // namespace tandem::tools
