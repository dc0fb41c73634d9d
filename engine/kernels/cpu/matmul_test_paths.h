#pragma once
// The matmul paths a test runs (test-only): every ISA, FP8 decode, INT4 activation kind and the
// GEMM/GEMV split, each with the NMSE its results must reach against the double oracle, and the
// subset this CPU can run.

#include <string>
#include <vector>

#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu::testing_paths {

// fp32 accumulation over K <= 14336 terms of well-scaled data.
constexpr double kNmseFp32Accumulation = 1e-9;
// INT4 with int16 activations: per-group 15-bit activation quantization.
constexpr double kNmseInt4Int16 = 1e-8;
// INT4 with int8 activations: 7-bit activation quantization (the fast, lossy mode).
constexpr double kNmseInt4Int8 = 2e-4;

struct Path {
  const char* name;
  MatmulOptions options;
  double tolerance_int4;
  const char* isa;  // what MatmulIsa(options) must say for the path to run here
};

inline std::vector<Path> AllPaths() {
  MatmulOptions portable;
  portable.force_portable = true;
  MatmulOptions avx512;
  MatmulOptions avx512_i8;
  avx512_i8.int4_activation = Int4Activation::kInt8;
  MatmulOptions avx512_gemv_all;
  avx512_gemv_all.gemv_max_batch = 1 << 20;  // every batch takes the GEMV path (slices of 4 rows)
  MatmulOptions avx2 = avx512, avx2_i8 = avx512_i8, avx2_gemv_all = avx512_gemv_all;
  for (MatmulOptions* o : {&avx2, &avx2_i8, &avx2_gemv_all}) o->allow_avx512 = false;
  MatmulOptions gemm_only;
  gemm_only.gemv_max_batch = 0;  // every batch takes the GEMM path (AVX2)
  gemm_only.allow_avx512 = false;
  // Both FP8 decodes on every ISA, whichever one Fp8Decode::kAuto picks on this host.
  MatmulOptions avx512_half = avx512, avx512_direct = avx512, avx2_half = avx2, avx2_direct = avx2;
  avx512_half.fp8_decode = avx2_half.fp8_decode = Fp8Decode::kHalf;
  avx512_direct.fp8_decode = avx2_direct.fp8_decode = Fp8Decode::kDirect;
  return {{"portable", portable, kNmseFp32Accumulation, "portable"},
          {"avx512", avx512, kNmseInt4Int16, "avx512"},
          {"avx512_fp8_half", avx512_half, kNmseInt4Int16, "avx512"},
          {"avx512_fp8_direct", avx512_direct, kNmseInt4Int16, "avx512"},
          {"avx2_fp8_half", avx2_half, kNmseInt4Int16, "avx2"},
          {"avx2_fp8_direct", avx2_direct, kNmseInt4Int16, "avx2"},
          {"avx512_int8_act", avx512_i8, kNmseInt4Int8, "avx512"},
          {"avx512_gemv_all", avx512_gemv_all, kNmseInt4Int16, "avx512"},
          {"avx2", avx2, kNmseInt4Int16, "avx2"},
          {"avx2_int8_act", avx2_i8, kNmseInt4Int8, "avx2"},
          {"avx2_gemv_all", avx2_gemv_all, kNmseInt4Int16, "avx2"},
          {"gemm", gemm_only, kNmseFp32Accumulation, "avx2"}};
}

// The paths this CPU runs: a path whose ISA is missing would silently take another ISA's kernels,
// so it is left out here and named by MatmulIsaTest.EveryPathRunsHere (skipped, not passed).
inline std::vector<Path> Paths() {
  std::vector<Path> out;
  for (const Path& p : AllPaths()) {
    if (std::string(MatmulIsa(p.options)) == p.isa) out.push_back(p);
  }
  return out;
}

}  // namespace tandem::engine::kernels::cpu::testing_paths
