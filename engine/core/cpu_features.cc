#include "engine/core/cpu_features.h"

#include <thread>

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
  f.f16c = __builtin_cpu_supports("f16c");
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

}  // namespace tandem::engine
