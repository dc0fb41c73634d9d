#pragma once
// Test helpers shared by the multi-variant CPU kernel tests (attention_test.cc,
// vector_ops_test.cc, cpu_backend_test.cc, ...): running a body under each ISA ceiling the host
// runs, the normalized mean squared error they hold results to, and random inputs.

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/core/cpu_features.h"

namespace tandem::engine::kernels::cpu {

// Runs body(isa) under each kernel ceiling this host runs (portable first), restoring the ceiling
// after. The variants the host lacks are named by each suite's EveryVariantRunsHere skip.
template <typename Body>
void ForEachKernelIsa(Body body) {
  struct Restore {
    KernelIsa before = KernelIsaCeiling();
    ~Restore() { SetKernelIsaCeiling(before); }
  } restore;
  for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (isa > HostKernelIsa()) continue;
    SetKernelIsaCeiling(isa);
    body(isa);
  }
}

// Σ (got - want)² / Σ want² over the entries where want is not NaN (Σ (got - want)² when want is
// all zeros). REQUIRES: got.size() >= want.size().
inline double Nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) continue;
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm == 0 ? err : err / norm;
}

// n values drawn from N(0, sigma²) with a seeded generator.
inline std::vector<float> Gauss(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

}  // namespace tandem::engine::kernels::cpu
