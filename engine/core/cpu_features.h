#pragma once
// What the host CPU can run, detected once at run time: kernels pick their variant from this.

#include <string>

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
  // "avx2 fma f16c" etc., for logs and `tandem version`.
  std::string ToString() const;
};

// Detected on first call; thread-safe.
const CpuFeatures& HostCpuFeatures();

}  // namespace tandem::engine
