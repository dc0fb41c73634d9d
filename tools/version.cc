#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/core/accelerator.h"
#include "engine/core/cpu_features.h"
#include "engine/formats/convert.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kernels/cpu/vector_ops.h"
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
  std::printf("cpu: %d logical cores, features: %s, widest kernels: %s\n", cpu.logical_cores,
              cpu.ToString().c_str(), engine::KernelIsaName(engine::HostKernelIsa()));
  // What each multi-variant kernel family runs now (TANDEM_ISA caps them all).
  const char* decode = engine::kernels::cpu::MatmulIsa();
  const char* env = std::getenv("TANDEM_ISA");
  std::printf(
      "kernels (TANDEM_ISA=%s): matmul decode %s (fp8 %s), prefill %s; vector ops %s; kv convert %s\n",
      env != nullptr && *env != '\0' ? env : "unset", decode, engine::kernels::cpu::MatmulFp8Decode(),
      std::string_view(decode) == "portable" ? "portable" : "avx2", engine::kernels::cpu::VectorOpsIsa(),
      engine::KernelIsaName(static_cast<engine::KernelIsa>(engine::ActiveConvertIsa())));
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
