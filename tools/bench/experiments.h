#pragma once
// The experiments of `tandem bench` (docs/performance.md, "tandem bench"). Each returns the report
// WriteReport turns into DIR/<experiment>.{md,csv,json,svg}; none writes files itself.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/bench/report.h"

namespace tandem::tools::bench {

struct Options {
  std::string out = "bench-results";
  bool quick = false;  // CI size: a tiny model, two concurrencies, one round (seconds)
  // The model: a preset with dummy weights (default: bench, the weights experiment bench-glm), or
  // a checkpoint directory (weights: its fp8 and int4 copies are made beside it if missing).
  std::string preset;
  std::string model_dir;
  std::vector<int> concurrency;  // empty: 1 8 16 32 64
  int prompt_tokens = 0;         // 0: the experiment's default
  int output_tokens = 0;
  int rounds = 0;   // A B A B ... rounds; 0: the experiment's default
  int threads = 0;  // forward-pass threads; 0: every core
  // kv-capacity: the KV byte budget per GPU / host and the context length for max concurrency.
  double kv_gib = 0;
  int64_t context = 0;

  // serve / integrity: the endpoint and the load.
  std::string url;      // http://host:port (serve: empty starts a tandem local of its own)
  std::string api_key;  // Authorization: Bearer
  std::string model_name;
  std::vector<double> rates;  // requests/s sweep (open loop, Poisson); empty: concurrency sweep
  int num_requests = 0;       // per point; 0: the experiment's default
  double input_spread = 0;    // input / output lengths uniform in [n (1 - spread), n (1 + spread)]
  double output_spread = 0;
  double slo_ttft_s = 0;  // goodput: requests meeting every SLO given (0: not used)
  double slo_itl_s = 0;
  double slo_e2e_s = 0;
  uint64_t seed = 1;
};

// A size: the flag's value when given, else the experiment's --quick or full default.
inline int Pick(int given, int quick, int full, const Options& o) {
  return given > 0 ? given : o.quick ? quick : full;
}

StatusOr<Report> RunKvCapacity(const Options& options);
StatusOr<Report> RunKvDecode(const Options& options);
StatusOr<Report> RunWeights(const Options& options);
StatusOr<Report> RunServe(const Options& options);
StatusOr<Report> RunIntegrity(const Options& options);

}  // namespace tandem::tools::bench
