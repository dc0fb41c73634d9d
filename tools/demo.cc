// `tandem demo`: what the engine can do end to end today. It builds one KV page of MLA latent
// rows (as the prefill pool writes them, BF16), converts it to the decode pool's FP8 E4M3 cache
// with a per-tensor scale, reads it back, and reports bytes per token and the error introduced.
// It grows into the local disaggregated stack answering a request (roadmap step 6).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/core/accelerator.h"
#include "engine/core/cpu_features.h"
#include "engine/core/dtype.h"
#include "engine/formats/convert.h"
#include "engine/formats/float_codecs.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

struct DemoArgs {
  int page_tokens = 64;
  int layers = 61;  // Kimi K2.x
  unsigned seed = 1;
};

bool ParseInt(const std::string& text, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseDemoArgs(const std::vector<std::string>& args, DemoArgs* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return false;
    const std::string& v = args[++i];
    int seed = 0;
    if (a == "--page-tokens" && ParseInt(v, 1, 4096, &out->page_tokens)) continue;
    if (a == "--layers" && ParseInt(v, 1, 256, &out->layers)) continue;
    if (a == "--seed" && ParseInt(v, 0, 1 << 30, &seed)) {
      out->seed = static_cast<unsigned>(seed);
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  DemoArgs opt;
  if (!ParseDemoArgs(args, &opt)) {
    std::fprintf(stderr, "usage: tandem demo [--page-tokens 1..4096] [--layers 1..256] [--seed N]\n");
    return 2;
  }
  constexpr size_t kRow = 512 + 64;  // kv_lora_rank + qk_rope_head_dim
  const size_t n = kRow * static_cast<size_t>(opt.page_tokens) * static_cast<size_t>(opt.layers);

  const engine::CpuFeatures& cpu = engine::HostCpuFeatures();
  engine::AcceleratorInfo acc = engine::QueryAccelerators();
  std::printf("Tandem engine demo: one KV page through the prefill->decode precision path\n");
  std::printf("host: %d cores, %s; cuda: %s\n", cpu.logical_cores, cpu.ToString().c_str(),
              acc.cuda_compiled ? (std::to_string(acc.cuda_devices) + " device(s)").c_str() : "not compiled");

  // Latent activations are roughly Gaussian with a few large outliers; model that with a
  // per-channel scale so the per-tensor FP8 scale has something to do.
  std::mt19937 rng(opt.seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> channel_scale(kRow);
  for (size_t c = 0; c < kRow; ++c) channel_scale[c] = (c % 97 == 0) ? 8.0f : 0.5f + 0.01f * (c % 50);
  std::vector<uint16_t> bf16(n);
  for (size_t i = 0; i < n; ++i) bf16[i] = engine::FloatToBf16(gauss(rng) * channel_scale[i % kRow]);

  const float scale = engine::Fp8E4M3ScaleForBf16(bf16.data(), n);
  std::vector<uint8_t> fp8(n);
  std::vector<uint16_t> back(n);
  engine::ConvertBf16ToFp8E4M3Ref(bf16.data(), fp8.data(), n, 1.0f / scale);
  engine::ConvertFp8E4M3ToBf16Ref(fp8.data(), back.data(), n, scale);

  double err2 = 0, ref2 = 0, max_abs = 0;
  for (size_t i = 0; i < n; ++i) {
    double a = engine::Bf16ToFloat(bf16[i]), b = engine::Bf16ToFloat(back[i]);
    err2 += (a - b) * (a - b);
    ref2 += a * a;
    max_abs = std::fmax(max_abs, std::fabs(a - b));
  }
  const size_t bf16_bytes = engine::KvBytesPerTokenLayer(engine::KvCacheDtype::kBf16);
  const size_t fp8_bytes = engine::KvBytesPerTokenLayer(engine::KvCacheDtype::kFp8E4M3);
  std::printf("page: %d tokens x %d layers x %zu latent values = %zu values\n", opt.page_tokens, opt.layers,
              kRow, n);
  std::printf("  bf16 KV: %zu bytes/token/layer, page %zu bytes\n", bf16_bytes, n * 2);
  std::printf("  fp8_e4m3 KV: %zu bytes/token/layer, page %zu bytes -> %.2fx tokens per byte\n", fp8_bytes, n,
              static_cast<double>(bf16_bytes) / static_cast<double>(fp8_bytes));
  std::printf("  per-tensor scale %.6g, relative Frobenius error %.4f, max abs error %.4g\n", scale,
              std::sqrt(err2 / ref2), max_abs);
  return 0;
}

}  // namespace tandem::tools
