// `tandem bench <experiment> [flags]`: production's tables measured on this machine
// (docs/performance.md, "tandem bench"). Writes DIR/<experiment>.{md,csv,json,svg}; `all` runs
// every experiment and writes DIR/index.md over them.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tools/bench/experiments.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

using bench::Options;
using bench::Report;

constexpr char kUsage[] =
    "usage: tandem bench <experiment> [--out DIR (bench-results)] [--quick] [flags]\n"
    "experiments:\n"
    "  kv-capacity  KV tokens held at a byte budget, BF16 vs FP8; max concurrency at a context length\n"
    "  kv-decode    decode tok/s at concurrency 1..64, BF16 vs FP8 KV, through the real scheduler\n"
    "  weights      decode and prefill tok/s, FP8 vs INT4 weights (GLM shape); checkpoint/resident bytes\n"
    "  integrity    throughput and p50/p95 latency, page tags off vs on, tandem local 2 prefill + 2 decode\n"
    "  serve        a load generator against any OpenAI-compatible endpoint (--url), or a tandem local it "
    "starts\n"
    "  all          every experiment and DIR/index.md\n"
    "model:   --preset NAME (bench; weights: bench-glm) | --model DIR (a checkpoint)  [--threads N]\n"
    "sweep:   --concurrency 1,8,16,32,64  --prompt-tokens N  --output-tokens N  --rounds N\n"
    "         --kv-gib X --context N (kv-capacity)\n"
    "serve:   --url http://HOST:PORT  --api-key KEY  --model-name NAME  --rates 1,2,4 (req/s; default:\n"
    "         the concurrency sweep)  --requests N  --input-spread F  --output-spread F\n"
    "         --slo-ttft S  --slo-itl S  --slo-e2e S (goodput)  --seed N\n";

bool ParseList(const std::string& v, std::vector<double>* out) {
  std::stringstream ss(v);
  std::string item;
  out->clear();
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(d > 0)) return false;
    out->push_back(d);
  }
  return !out->empty();
}

// Returns "" or the error.
std::string ParseArgs(const std::vector<std::string>& args, Options* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--quick") {
      o->quick = true;
      continue;
    }
    if (i + 1 >= args.size()) return flag + " needs a value";
    const std::string& v = args[++i];
    char* end = nullptr;
    const auto integer = [&](int lo, int hi, int* dst) {
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < lo || n > hi) return false;
      *dst = static_cast<int>(n);
      return true;
    };
    const auto real = [&](double lo, double hi, double* dst) {
      const double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(d >= lo && d <= hi)) return false;
      *dst = d;
      return true;
    };
    bool ok = true;
    std::vector<double> list;
    if (flag == "--out") {
      o->out = v;
    } else if (flag == "--preset") {
      o->preset = v;
    } else if (flag == "--model") {
      o->model_dir = v;
    } else if (flag == "--threads") {
      ok = integer(1, 256, &o->threads);
    } else if (flag == "--concurrency") {
      ok = ParseList(v, &list);
      o->concurrency.clear();
      for (double d : list) {
        ok = ok && d == static_cast<int>(d) && d <= 1024;
        o->concurrency.push_back(static_cast<int>(d));
      }
    } else if (flag == "--prompt-tokens") {
      ok = integer(1, 1 << 20, &o->prompt_tokens);
    } else if (flag == "--output-tokens") {
      ok = integer(1, 1 << 20, &o->output_tokens);
    } else if (flag == "--rounds") {
      ok = integer(1, 100, &o->rounds);
    } else if (flag == "--kv-gib") {
      ok = real(1e-3, 1e6, &o->kv_gib);
    } else if (flag == "--context") {
      int n = 0;
      ok = integer(1, 1 << 24, &n);
      o->context = n;
    } else if (flag == "--url") {
      o->url = v;
    } else if (flag == "--api-key") {
      o->api_key = v;
    } else if (flag == "--model-name") {
      o->model_name = v;
    } else if (flag == "--rates") {
      ok = ParseList(v, &o->rates);
    } else if (flag == "--requests") {
      ok = integer(1, 1 << 20, &o->num_requests);
    } else if (flag == "--input-spread") {
      ok = real(0, 0.99, &o->input_spread);
    } else if (flag == "--output-spread") {
      ok = real(0, 0.99, &o->output_spread);
    } else if (flag == "--slo-ttft") {
      ok = real(0, 1e6, &o->slo_ttft_s);
    } else if (flag == "--slo-itl") {
      ok = real(0, 1e6, &o->slo_itl_s);
    } else if (flag == "--slo-e2e") {
      ok = real(0, 1e6, &o->slo_e2e_s);
    } else if (flag == "--seed") {
      int n = 0;
      ok = integer(0, 1 << 30, &n);
      o->seed = static_cast<uint64_t>(n);
    } else {
      return "unknown flag " + flag;
    }
    if (!ok) return flag + ": bad value '" + v + "'";
  }
  return "";
}

struct Experiment {
  const char* name;
  std::function<StatusOr<Report>(const Options&)> run;
};

const std::vector<Experiment>& Experiments() {
  static const std::vector<Experiment> kAll = {
      {"kv-capacity", bench::RunKvCapacity},
      {"kv-decode", bench::RunKvDecode},
      {"weights", bench::RunWeights},
      {"integrity", bench::RunIntegrity},
      {"serve", bench::RunServe},
  };
  return kAll;
}

// Runs one experiment and writes its files; prints the Markdown table and where the files went.
StatusOr<Report> RunOne(const Experiment& e, const Options& o) {
  ASSIGN_OR_RETURN(Report r, e.run(o));
  ASSIGN_OR_RETURN(const std::vector<std::string> files, bench::WriteReport(r, o.out));
  if (!r.tables.empty()) std::printf("\n## %s\n\n%s\n", r.title.c_str(), r.tables[0].Markdown().c_str());
  for (const bench::Target& t : r.targets) {
    std::printf("target: %s: %.4g (wanted %s %.4g) %s\n", t.name.c_str(), t.value,
                t.at_least ? ">=" : "<=", t.threshold, t.Met() ? "met" : "MISSED");
  }
  for (const std::string& f : files) std::printf("wrote %s\n", f.c_str());
  std::fflush(stdout);
  return r;
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help") {
    std::fprintf(args.empty() ? stderr : stdout, "%s", kUsage);
    return args.empty() ? 2 : 0;
  }
  Options o;
  if (const std::string err = ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), &o);
      !err.empty()) {
    std::fprintf(stderr, "tandem bench: %s\n%s", err.c_str(), kUsage);
    return 2;
  }
  const std::string& which = args[0];
  if (which == "all") {
    std::string index = "# tandem bench: every experiment\n\n";
    int failures = 0;
    for (const Experiment& e : Experiments()) {
      StatusOr<Report> r = RunOne(e, o);
      if (!r.ok()) {
        std::fprintf(stderr, "tandem bench %s: %s\n", e.name, r.status().ToString().c_str());
        index += "## " + std::string(e.name) + "\n\nfailed: " + r.status().ToString() + "\n\n";
        ++failures;
        continue;
      }
      index += "## [" + r->title + "](" + r->experiment + ".md)\n\n";
      if (!r->plots.empty()) index += "![" + r->plots[0].title + "](" + r->experiment + ".svg)\n\n";
      if (!r->tables.empty()) index += r->tables[0].Markdown() + "\n";
      for (const bench::Target& t : r->targets) {
        char line[512];
        std::snprintf(line, sizeof(line), "- %s: **%.4g** (wanted %s %.4g; production %s): %s\n",
                      t.name.c_str(), t.value, t.at_least ? ">=" : "<=", t.threshold, t.production.c_str(),
                      t.Met() ? "met" : "**missed**");
        index += line;
      }
      index += "\n";
    }
    std::ofstream out(o.out + "/index.md", std::ios::trunc);
    out << index;
    out.close();
    if (!out) {
      std::fprintf(stderr, "tandem bench: cannot write %s/index.md\n", o.out.c_str());
      return 1;
    }
    std::printf("wrote %s/index.md\n", o.out.c_str());
    return failures == 0 ? 0 : 1;
  }
  for (const Experiment& e : Experiments()) {
    if (which != e.name) continue;
    StatusOr<Report> r = RunOne(e, o);
    if (!r.ok()) {
      std::fprintf(stderr, "tandem bench %s: %s\n", e.name, r.status().ToString().c_str());
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "tandem bench: unknown experiment '%s'\n%s", which.c_str(), kUsage);
  return 2;
}

}  // namespace tandem::tools
