// `tandem quantize`: re-quantizes a Hugging Face checkpoint directory to INT4 (routed experts,
// compressed-tensors pack-quantized) or FP8 block-128 (every Linear but the heads and the router),
// then reports sizes and the per-tensor round-trip error. The work is engine::io::QuantizeCheckpoint;
// this file parses arguments, draws the progress bar and prints the report.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "engine/io/quantize_checkpoint.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

namespace eio = engine::io;

constexpr char kUsage[] =
    "usage: tandem quantize --input DIR --output DIR --to int4|fp8\n"
    "                       [--max-shard-bytes N (default 5000000000)] [--threads N] [--progress]\n";

constexpr double kGB = 1e9;

bool ParseU64(const std::string& text, uint64_t lo, uint64_t hi, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct CliArgs {
  eio::QuantizeOptions options;
  bool have_target = false;
  bool progress = false;
};

// "" or what is wrong with the arguments, naming the flag.
std::string ParseArgs(const std::vector<std::string>& args, CliArgs* out) {
  eio::QuantizeOptions& o = out->options;
  o.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--progress") {
      out->progress = true;
      continue;
    }
    if (a != "--input" && a != "--output" && a != "--to" && a != "--max-shard-bytes" && a != "--threads")
      return "unknown argument '" + a + "'";
    if (i + 1 >= args.size()) return a + ": missing value";
    const std::string& v = args[++i];
    uint64_t n = 0;
    if (a == "--input") {
      o.input_dir = v;
    } else if (a == "--output") {
      o.output_dir = v;
    } else if (a == "--to") {
      StatusOr<eio::QuantizeTarget> target = eio::ParseQuantizeTarget(v);
      if (!target.ok()) return a + ": " + target.status().message();
      o.target = *target;
      out->have_target = true;
    } else if (a == "--max-shard-bytes") {
      if (!ParseU64(v, 1, UINT64_MAX, &n)) return a + ": want a positive integer, got '" + v + "'";
      o.max_shard_bytes = n;
    } else {
      if (!ParseU64(v, 1, 256, &n)) return a + ": want an integer in 1..256, got '" + v + "'";
      o.threads = static_cast<int>(n);
    }
  }
  if (o.input_dir.empty()) return "--input is required";
  if (o.output_dir.empty()) return "--output is required";
  if (!out->have_target) return "--to is required";
  return "";
}

// One carriage-returned line on stderr: "[#####.....] 120/384 tensors  1.9 GB/s".
eio::QuantizeProgressFn ProgressBar() {
  const auto start = std::chrono::steady_clock::now();
  return [start](size_t done, size_t total, uint64_t bytes_done) {
    constexpr int kWidth = 30;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r[%s] %zu/%zu tensors  %.2f GB/s", bar.c_str(), done, total,
                 s > 0 ? static_cast<double>(bytes_done) / kGB / s : 0.0);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

void PrintReport(const eio::QuantizeOptions& o, const eio::QuantizeReport& r) {
  std::printf("wrote %s (%s)\n", o.output_dir.c_str(),
              o.target == eio::QuantizeTarget::kInt4 ? "int4" : "fp8");
  std::printf("size: %llu bytes (%.3f GB) -> %llu bytes (%.3f GB), ratio %.3f\n",
              static_cast<unsigned long long>(r.input_bytes), static_cast<double>(r.input_bytes) / kGB,
              static_cast<unsigned long long>(r.output_bytes), static_cast<double>(r.output_bytes) / kGB,
              r.Ratio());
  std::printf("tensors: %zu quantized, %zu kept\n", r.errors.size(), r.tensors_kept);
  if (r.errors.empty()) return;
  const std::vector<eio::TensorError> worst = r.Worst(5);
  std::printf("relative Frobenius error ||W - deq(Q(W))|| / ||W||: mean %.4f, max %.4f (%s)\n", r.MeanError(),
              worst[0].relative_error, worst[0].name.c_str());
  std::printf("worst %zu:\n", worst.size());
  for (const eio::TensorError& e : worst) std::printf("  %.4f  %s\n", e.relative_error, e.name.c_str());
}

}  // namespace

int RunQuantize(const std::vector<std::string>& args) {
  CliArgs cli;
  if (std::string error = ParseArgs(args, &cli); !error.empty()) {
    std::fprintf(stderr, "tandem quantize: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
  if (cli.progress || isatty(STDERR_FILENO)) cli.options.on_progress = ProgressBar();
  StatusOr<eio::QuantizeReport> report = eio::QuantizeCheckpoint(cli.options);
  if (!report.ok()) {
    std::fprintf(stderr, "tandem quantize: %s\n", report.status().ToString().c_str());
    return 1;
  }
  PrintReport(cli.options, *report);
  return 0;
}

}  // namespace tandem::tools
