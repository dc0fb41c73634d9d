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
  // True when the AVX-512 GEMV kernels may run (compiled for F/BW/VL/DQ/VNNI: every CPU with
  // AVX-512 BW and VNNI also has VL and DQ).
  bool HasAvx512Kernels() const { return avx512f && avx512bw && avx512vnni && fma; }
  // "avx2 fma f16c" etc., for logs and `tandem version`.
  std::string ToString() const;
};

// Detected on first call; thread-safe.
const CpuFeatures& HostCpuFeatures();

}  // namespace tandem::engine
