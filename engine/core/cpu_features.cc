#include "engine/core/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tandem::engine {

std::string CpuFeatures::ToString() const {
  std::string out;
  auto add = [&out](bool has, const char* name) {
    if (!has) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  return out.empty() ? "portable" : out;
}

static CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID.1:ECX.F16C (clang's builtin does not know "f16c")
  f.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
#endif
  unsigned n = std::thread::hardware_concurrency();
  f.logical_cores = n == 0 ? 1 : static_cast<int>(n);
  return f;
}

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return "avx512";
    case KernelIsa::kAvx2: return "avx2";
    case KernelIsa::kPortable: break;
  }
  return "portable";
}

bool ParseKernelIsa(std::string_view name, KernelIsa* out) {
  for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (name == KernelIsaName(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

KernelIsa HostKernelIsa() {
  const CpuFeatures& cpu = HostCpuFeatures();
  if (!cpu.HasAvx2Kernels()) return KernelIsa::kPortable;  // the AVX-512 hosts' GEMM path is AVX2
  return cpu.HasAvx512Kernels() ? KernelIsa::kAvx512 : KernelIsa::kAvx2;
}

namespace {

const char* IsaEnvironment() {
  const char* env = std::getenv("TANDEM_ISA");
  return env == nullptr ? "" : env;
}

KernelIsa CeilingFromEnvironment() {
  KernelIsa isa = KernelIsa::kAvx512;
  const std::string_view env = IsaEnvironment();
  if (!env.empty()) ParseKernelIsa(env, &isa);
  return isa;
}

std::atomic<KernelIsa>& Ceiling() {
  static std::atomic<KernelIsa> ceiling{CeilingFromEnvironment()};
  return ceiling;
}

}  // namespace

KernelIsa KernelIsaCeiling() { return Ceiling().load(std::memory_order_relaxed); }

void SetKernelIsaCeiling(KernelIsa widest) { Ceiling().store(widest, std::memory_order_relaxed); }

KernelIsa ActiveKernelIsa() { return std::min(HostKernelIsa(), KernelIsaCeiling()); }

std::string KernelIsaEnvironmentError() {
  const std::string_view env = IsaEnvironment();
  KernelIsa isa;
  if (env.empty() || ParseKernelIsa(env, &isa)) return "";
  return "TANDEM_ISA=" + std::string(env) + " names no kernel variant (portable, avx2 or avx512)";
}

}  // namespace tandem::engine
