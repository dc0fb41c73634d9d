// `tandem demo`: what the engine can do end to end today, in two stages.
//  1. One KV page of MLA latent rows (as the prefill pool writes them, BF16) converted to the
//     decode pool's FP8 E4M3 cache with a per-tensor scale and read back: bytes per token, error.
//  2. One routed expert's up-projection (Kimi K2 shape: 2048 x 7168) quantized the way each pool
//     stores it (BF16, FP8 block-128, INT4 group-32) and run for one decode token on the CPU
//     kernels: weight bytes, time per token and the output's error against BF16.
// It grows into the local disaggregated stack answering a request (roadmap step 6).
#include <algorithm>
#include <chrono>
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
#include "engine/formats/weights.h"
#include "engine/kernels/cpu/matmul.h"
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

// "" or what is wrong with the arguments, naming the flag.
std::string ParseDemoArgs(const std::vector<std::string>& args, DemoArgs* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a != "--page-tokens" && a != "--layers" && a != "--seed") return "unknown argument '" + a + "'";
    if (i + 1 >= args.size()) return a + ": missing value";
    const std::string& v = args[++i];
    int seed = 0;
    if (a == "--page-tokens" && !ParseInt(v, 1, 4096, &out->page_tokens))
      return a + ": want an integer in 1..4096, got '" + v + "'";
    if (a == "--layers" && !ParseInt(v, 1, 256, &out->layers))
      return a + ": want an integer in 1..256, got '" + v + "'";
    if (a == "--seed") {
      if (!ParseInt(v, 0, 1 << 30, &seed)) return a + ": want an integer in 0..2^30, got '" + v + "'";
      out->seed = static_cast<unsigned>(seed);
    }
  }
  return "";
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    ref += static_cast<double>(want[i]) * want[i];
  }
  return ref > 0 ? std::sqrt(err / ref) : 0.0;
}

// Reads 96 MiB (three times a 32 MiB L3), so the next call's weights come from DRAM, as a real
// model's experts do (they are gigabytes; the demo's one expert would otherwise sit in L3).
void EvictCaches() {
  static std::vector<uint8_t> buffer(size_t{96} << 20, 1);
  volatile uint64_t sink = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < buffer.size(); i += 64) sum += buffer[i];
  sink = sink + sum;
}

// Seconds of one Matmul call for one token, from DRAM; negative on error.
double TimeMatmul(const engine::kernels::cpu::PackedWeight& w, const std::vector<float>& x,
                  std::vector<float>* y, engine::ThreadPool* pool) {
  EvictCaches();
  auto start = std::chrono::steady_clock::now();
  Status s = engine::kernels::cpu::Matmul(w, x.data(), 1, y->data(), pool);
  if (!s.ok()) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Stage 2: one expert in every weight format.
int RunExpertStage(unsigned seed) {
  namespace cpu = engine::kernels::cpu;
  constexpr int64_t kRows = 2048, kCols = 7168;  // moe_intermediate_size x hidden_size
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(kRows * kCols));
  std::vector<uint16_t> w_bf16(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w_bf16[i] = engine::FloatToBf16(gauss(rng));
    w[i] = engine::Bf16ToFloat(w_bf16[i]);
  }
  std::vector<uint8_t> fp8(w.size());
  std::vector<float> fp8_scale(
      static_cast<size_t>(engine::Fp8ScaleRows(kRows) * engine::Fp8ScaleCols(kCols)));
  engine::QuantizeFp8Block128Ref(w.data(), kRows, kCols, fp8.data(), fp8_scale.data());
  std::vector<int32_t> packed(static_cast<size_t>(kRows * engine::Int4PackedCols(kCols)));
  std::vector<uint16_t> int4_scale(static_cast<size_t>(kRows * engine::Int4ScaleCols(kCols)));
  engine::QuantizeInt4Group32Ref(w.data(), kRows, kCols, packed.data(), int4_scale.data());

  StatusOr<cpu::PackedWeight> bf16 = cpu::PackedWeight::FromBf16({w_bf16.data(), kRows, kCols});
  StatusOr<cpu::PackedWeight> fp8w = cpu::PackedWeight::FromFp8({fp8.data(), fp8_scale.data(), kRows, kCols});
  StatusOr<cpu::PackedWeight> int4 =
      cpu::PackedWeight::FromInt4({packed.data(), int4_scale.data(), kRows, kCols});
  if (!bf16.ok() || !fp8w.ok() || !int4.ok()) {
    std::fprintf(stderr, "demo: packing failed\n");
    return 1;
  }
  std::normal_distribution<float> act(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kCols));
  for (float& v : x) v = act(rng);
  engine::ThreadPool pool(engine::HostCpuFeatures().logical_cores);
  std::vector<float> y_bf16(kRows), y(kRows);
  std::printf(
      "expert up-projection %lld x %lld, one decode token from DRAM, %d threads, %s kernels (fp8 %s "
      "decode):\n",
      static_cast<long long>(kRows), static_cast<long long>(kCols), pool.num_threads(), cpu::MatmulIsa(),
      cpu::MatmulFp8Decode());
  double t_bf16 = 0;
  const struct {
    const char* name;
    const cpu::PackedWeight* w;
  } formats[] = {{"bf16", &*bf16}, {"fp8 ", &*fp8w}, {"int4", &*int4}};
  // Rounds alternate the formats (bf16 fp8 int4, bf16 fp8 int4, ...), each call from DRAM; the
  // median of 9 per format, so a noisy neighbour moves every format alike.
  constexpr int kRounds = 9;
  std::vector<double> runs[3];
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      const double t = TimeMatmul(*formats[i].w, x, &y, &pool);
      if (t < 0) return 1;
      runs[i].push_back(t);
    }
  }
  for (int i = 0; i < 3; ++i) {
    const auto& f = formats[i];
    std::sort(runs[i].begin(), runs[i].end());
    const double t = runs[i][kRounds / 2];
    if (Status s = cpu::Matmul(*f.w, x.data(), 1, y.data(), &pool); !s.ok()) return 1;
    if (f.w == &*bf16) {  // the first row is the reference the others are compared with
      t_bf16 = t;
      y_bf16 = y;
    }
    std::printf("  %s weights %6.2f MB, %7.1f us/token (%.2fx bf16 time), output error vs bf16 %.4f\n",
                f.name, static_cast<double>(f.w->StreamedBytes()) / 1e6, t * 1e6, t / t_bf16,
                RelativeError(y, y_bf16));
  }
  return 0;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  DemoArgs opt;
  if (std::string error = ParseDemoArgs(args, &opt); !error.empty()) {
    std::fprintf(stderr,
                 "tandem demo: %s\nusage: tandem demo [--page-tokens 1..4096] [--layers 1..256] [--seed N]\n",
                 error.c_str());
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
  return RunExpertStage(opt.seed);
}

}  // namespace tandem::tools
