#pragma once
// What the host CPU can run, detected once at run time: kernels pick their variant from this.

#include <string>
#include <string_view>

namespace tandem::engine {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  int logical_cores = 1;

  // True when the AVX2+FMA+F16C kernels may run.
  bool HasAvx2Kernels() const { return avx2 && fma && f16c; }
  // True when the AVX-512 GEMV kernels may run (compiled for F/BW/VL/DQ/VNNI: every CPU with
  // AVX-512 BW and VNNI also has VL and DQ).
  bool HasAvx512Kernels() const { return avx512f && avx512bw && avx512vnni && fma; }
  // "avx2 fma f16c" etc., for logs and `tandem version`.
  std::string ToString() const;
};

// Detected on first call; thread-safe.
const CpuFeatures& HostCpuFeatures();

// Kernel variants, narrowest first. Every kernel with several variants (the matmuls, the forward
// pass's vector loops, the KV page converters) runs the widest one that both the host has and the
// process-wide ceiling below allows, so an AVX-512 host runs, tests and benchmarks its AVX2 code
// too (TANDEM_ISA=avx2), and any host its portable code (TANDEM_ISA=portable).
enum class KernelIsa { kPortable, kAvx2, kAvx512 };

// "portable", "avx2", "avx512".
const char* KernelIsaName(KernelIsa isa);
// The inverse of KernelIsaName; false (out untouched) for any other text.
bool ParseKernelIsa(std::string_view name, KernelIsa* out);

// The widest variant this host runs: kAvx2 where HasAvx2Kernels, kAvx512 where HasAvx512Kernels too.
KernelIsa HostKernelIsa();

// The ceiling: from the TANDEM_ISA environment variable when first asked (unset or empty: kAvx512,
// i.e. none; a value KernelIsaEnvironmentError rejects counts as none, and tools refuse to start
// with it), or what SetKernelIsaCeiling set since. Thread-safe.
KernelIsa KernelIsaCeiling();
// Lowers or lifts the ceiling for every kernel from now on. Not while other threads run kernels.
void SetKernelIsaCeiling(KernelIsa widest);
// min(HostKernelIsa(), KernelIsaCeiling()): the widest variant kernels take now.
KernelIsa ActiveKernelIsa();
// Empty when TANDEM_ISA is unset, empty or a KernelIsaName; else the message a tool prints.
std::string KernelIsaEnvironmentError();

}  // namespace tandem::engine
