// kv-capacity, kv-decode and weights: the engine's own experiments (no HTTP). kv-decode and weights
// drive ServingEngine through its real scheduler (Engine::Submit / Step), two engines side by side
// over one set of weights where only the KV dtype differs, alternating batch by batch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv/page_pool.h"
#include "engine/model/dummy_model.h"
#include "engine/model/kv_shape.h"
#include "engine/model/model_stats.h"
#include "engine/model/model_weights.h"
#include "engine/model/presets.h"
#include "engine/runtime/serving_engine.h"
#include "tools/bench/experiments.h"
#include "tools/local_support.h"

namespace tandem::tools::bench {
namespace {

namespace model = engine::model;
namespace runtime = engine::runtime;
using engine::KvCacheDtype;
using engine::WeightFormat;
using Clock = std::chrono::steady_clock;

constexpr size_t kPageTokens = 64;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::vector<int> Concurrencies(const Options& o) {
  if (!o.concurrency.empty()) return o.concurrency;
  if (o.quick) return {1, 4};
  return {1, 8, 16, 32, 64};
}

// ---- kv-capacity ------------------------------------------------------------------------------

StatusOr<engine::kv::PoolGeometry> Geometry(const model::ModelConfig& c, KvCacheDtype dtype, double bytes) {
  engine::kv::PagePoolConfig p;
  p.shape = model::KvShapeFor(c);
  p.dtype = dtype;
  p.page_tokens = kPageTokens;
  p.budget_bytes = static_cast<size_t>(bytes);
  return engine::kv::ComputePoolGeometry(p);
}

}  // namespace

StatusOr<Report> RunKvCapacity(const Options& o) {
  // Production's BF16 figure on Kimi K2.6 (686K tokens) fixes the budget it ran with.
  ASSIGN_OR_RETURN(const model::ModelConfig kimi, model::Preset("kimi-k2.6"));
  const double kimi_bf16_token = static_cast<double>(model::KvBytesPerToken(kimi, KvCacheDtype::kBf16));
  const double production_budget = 686'000 * kimi_bf16_token;
  const double budget = o.kv_gib > 0 ? o.kv_gib * (1ull << 30) : production_budget;
  const int64_t context = o.context > 0 ? o.context : 8192 + 1000;  // production's input + output
  std::vector<std::string> shapes = {"kimi-k2.6", "glm-5.2", "bench", "bench-glm"};
  if (!o.preset.empty() && std::find(shapes.begin(), shapes.end(), o.preset) == shapes.end())
    shapes.push_back(o.preset);

  Report r;
  r.experiment = "kv-capacity";
  r.title = "KV tokens held at a fixed byte budget: BF16 vs FP8 (e4m3) KV";
  char intro[512];
  std::snprintf(intro, sizeof(intro),
                "Budget %.2f GB%s, pages of %zu tokens; capacity = floor(budget / page bytes) x page tokens "
                "(the pool's own ComputePoolGeometry). Max concurrency = requests of %lld tokens (prompt + "
                "output) whose pages fit at once.",
                budget / 1e9,
                o.kv_gib > 0 ? "" : " (the budget production's 686K BF16 tokens on Kimi K2.6 imply)",
                kPageTokens, static_cast<long long>(context));
  r.paragraphs.push_back(intro);
  r.config = {
      {"budget_bytes", budget}, {"page_tokens", kPageTokens}, {"context", context}, {"shapes", shapes}};
  Table t{"",
          {"model", "KV bytes/token BF16", "KV bytes/token FP8", "BF16 tokens", "FP8 tokens", "FP8/BF16",
           "max concurrency BF16", "max concurrency FP8"},
          {}};
  Plot plot{"Max concurrent requests in " + Bytes(budget).text + " of KV",
            "context length (tokens)",
            "max concurrent requests",
            true,
            true,
            {}};
  Progress progress("bench kv-capacity", static_cast<int64_t>(shapes.size()));
  for (const std::string& name : shapes) {
    ASSIGN_OR_RETURN(const model::ModelConfig c, model::Preset(name));
    ASSIGN_OR_RETURN(const auto bf16, Geometry(c, KvCacheDtype::kBf16, budget));
    ASSIGN_OR_RETURN(const auto fp8, Geometry(c, KvCacheDtype::kFp8E4M3, budget));
    const size_t pages_per_request = runtime::KvPagesForTokens(static_cast<size_t>(context), kPageTokens);
    const double ratio = static_cast<double>(fp8.capacity_tokens) / static_cast<double>(bf16.capacity_tokens);
    t.rows.push_back(
        {Text(name), Num(static_cast<double>(bf16.token_bytes)), Num(static_cast<double>(fp8.token_bytes)),
         Num(static_cast<double>(bf16.capacity_tokens)), Num(static_cast<double>(fp8.capacity_tokens)),
         Ratio(ratio), Num(static_cast<double>(bf16.num_pages / pages_per_request)),
         Num(static_cast<double>(fp8.num_pages / pages_per_request))});
    r.samples.push_back({{"model", name},
                         {"bf16_token_bytes", bf16.token_bytes},
                         {"fp8_token_bytes", fp8.token_bytes},
                         {"bf16_tokens", bf16.capacity_tokens},
                         {"fp8_tokens", fp8.capacity_tokens},
                         {"bf16_page_bytes", bf16.page_bytes},
                         {"fp8_page_bytes", fp8.page_bytes}});
    if (name == "kimi-k2.6") {
      r.targets.push_back(
          {"FP8/BF16 KV token capacity (Kimi K2.6)", ratio, 1.99, true, "x", "1.37M / 686K = 1.997x"});
    } else if (name == "glm-5.2") {
      r.targets.push_back({"FP8/BF16 KV token capacity (GLM 5.2, indexer keys included; reported)", ratio,
                           1.95, true, "x", "-"});
    }
    if (name == "kimi-k2.6" || name == "glm-5.2") {
      for (KvCacheDtype d : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
        const auto& g = d == KvCacheDtype::kBf16 ? bf16 : fp8;
        Series s{name + (d == KvCacheDtype::kBf16 ? " BF16" : " FP8"), {}, {}, false};
        for (int64_t ctx = 1024; ctx <= 131072; ctx *= 2) {
          s.x.push_back(static_cast<double>(ctx));
          s.y.push_back(static_cast<double>(
              g.num_pages / runtime::KvPagesForTokens(static_cast<size_t>(ctx), kPageTokens)));
        }
        plot.series.push_back(std::move(s));
      }
    }
    progress.Step(name);
  }
  r.tables.push_back(std::move(t));
  r.plots.push_back(std::move(plot));
  return r;
}

namespace {

// ---- the decode sweep shared by kv-decode and weights -----------------------------------------

struct BatchResult {
  double prefill_s = 0, decode_s = 0;
  int64_t prompt_tokens = 0, decode_tokens = 0;
  std::vector<double> step_ms;  // steps once every request had its first token
  int failed = 0;
  double DecodeTokS() const { return decode_tokens / std::max(1e-9, decode_s); }
  double PrefillTokS() const { return prompt_tokens / std::max(1e-9, prefill_s); }
};

// `concurrency` requests of `prompt` random tokens and `output` greedy tokens each, submitted at
// once and stepped to the end: the prefill phase lasts until every request has its first token,
// the decode phase from there to the last finish.
StatusOr<BatchResult> RunBatch(runtime::ServingEngine& s, int concurrency, int prompt, int output,
                               uint64_t seed) {
  runtime::Engine& e = s.engine();
  const int64_t vocab = s.model_config().vocab_size;
  std::unordered_map<runtime::RequestId, bool> got_first;
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < concurrency; ++i) {
    runtime::Request r;
    r.prompt.resize(prompt);
    for (int32_t& t : r.prompt) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      t = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
    }
    r.params.temperature = 0;
    r.params.max_tokens = output;
    r.params.ignore_eos = true;
    ASSIGN_OR_RETURN(const runtime::RequestId id, e.Submit(r));
    got_first[id] = false;
  }
  BatchResult b;
  b.prompt_tokens = static_cast<int64_t>(concurrency) * prompt;
  const Clock::time_point start = Clock::now();
  Clock::time_point decode_start;
  int with_first = 0, finished = 0;
  bool decoding = false;
  while (finished < concurrency) {
    const Clock::time_point t0 = Clock::now();
    const std::vector<runtime::RequestOutput> outs = e.Step();
    const Clock::time_point t1 = Clock::now();
    if (decoding) b.step_ms.push_back(Seconds(t1 - t0) * 1e3);
    for (const runtime::RequestOutput& out : outs) {
      auto it = got_first.find(out.id);
      if (it == got_first.end()) continue;
      if (!out.new_tokens.empty()) {
        if (!it->second) {
          it->second = true;
          ++with_first;
        } else if (decoding) {
          b.decode_tokens += static_cast<int64_t>(out.new_tokens.size());
        }
      }
      if (out.finish.has_value()) {
        ++finished;
        if (*out.finish != runtime::FinishReason::kLength) ++b.failed;
      }
    }
    if (!decoding && with_first == concurrency) {
      decoding = true;
      decode_start = t1;
      b.prefill_s = Seconds(t1 - start);
    }
  }
  b.decode_s = Seconds(Clock::now() - decode_start);
  return b;
}

struct Config {
  std::string name;  // "BF16 KV"
  std::unique_ptr<runtime::ServingEngine> serving;
};

struct Point {
  std::vector<double> decode_tok_s, itl_ms, prefill_tok_s;
  bool oom = false;
  size_t holds = 0;  // requests whose pages fit at once
};

// Every concurrency, `rounds` rounds, the configs alternating within each round.
StatusOr<std::vector<std::map<int, Point>>> Sweep(std::vector<Config>& configs, const std::vector<int>& cs,
                                                  int prompt, int output, int rounds,
                                                  const std::string& label, nlohmann::json* samples) {
  std::vector<std::map<int, Point>> points(configs.size());
  const size_t pages_per_request =
      runtime::KvPagesForTokens(static_cast<size_t>(prompt + output), kPageTokens);
  int64_t total = 0;
  for (int c : cs) {
    for (const Config& k : configs) {
      if (static_cast<size_t>(c) * pages_per_request <= k.serving->kv_pool().num_pages()) total += rounds;
    }
  }
  Progress progress("bench " + label, total + static_cast<int64_t>(configs.size()));
  for (Config& k : configs) {  // warm-up: first-step allocations, FP8 scale calibration
    ASSIGN_OR_RETURN(const BatchResult warm, RunBatch(*k.serving, 1, prompt, std::min(output, 4), 999));
    (void)warm;
    progress.Step("warm-up " + k.name);
  }
  for (int c : cs) {
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < configs.size(); ++i) {
        Point& p = points[i][c];
        p.holds = configs[i].serving->kv_pool().num_pages() / pages_per_request;
        if (static_cast<size_t>(c) > p.holds) {
          p.oom = true;
          continue;
        }
        ASSIGN_OR_RETURN(const BatchResult b, RunBatch(*configs[i].serving, c, prompt, output,
                                                       static_cast<uint64_t>(c * 1000 + round)));
        if (b.failed > 0) {
          return Status::Internal(configs[i].name + ": " + std::to_string(b.failed) + " of " +
                                  std::to_string(c) + " requests did not finish by length");
        }
        p.decode_tok_s.push_back(b.DecodeTokS());
        p.itl_ms.push_back(Median(b.step_ms));
        p.prefill_tok_s.push_back(b.PrefillTokS());
        samples->push_back({{"config", configs[i].name},
                            {"concurrency", c},
                            {"round", round},
                            {"decode_tok_s", b.DecodeTokS()},
                            {"decode_tokens", b.decode_tokens},
                            {"decode_s", b.decode_s},
                            {"prefill_s", b.prefill_s},
                            {"prefill_tok_s", b.PrefillTokS()},
                            {"itl_p50_ms", Median(b.step_ms)},
                            {"itl_p95_ms", Percentile(b.step_ms, 95)}});
        progress.Step(configs[i].name + " c=" + std::to_string(c) + " round " + std::to_string(round + 1));
      }
    }
  }
  return points;
}

StatusOr<std::unique_ptr<runtime::ServingEngine>> OpenEngine(const runtime::ServingConfig& base,
                                                             KvCacheDtype kv, size_t kv_bytes) {
  runtime::ServingConfig sc = base;
  sc.kv_dtype = kv;
  sc.kv_bytes = kv_bytes;
  sc.page_tokens = kPageTokens;
  sc.scheduler.max_running_requests = 256;
  return runtime::ServingEngine::Open(sc);
}

struct ProductionRow {
  int concurrency;
  double a, b;  // a < 0: out of memory
};

}  // namespace

StatusOr<Report> RunKvDecode(const Options& o) {
  const std::vector<int> cs = Concurrencies(o);
  const int prompt = Pick(o.prompt_tokens, 32, 512, o);
  const int output = Pick(o.output_tokens, 8, 64, o);
  const int rounds = Pick(o.rounds, 1, 3, o);
  const std::string preset = !o.preset.empty() ? o.preset : o.quick ? "tiny" : "bench";
  // One copy of the weights for both engines.
  std::unique_ptr<model::ModelWeights> dummy;
  runtime::ServingConfig base;
  base.threads = o.threads;
  std::unique_ptr<runtime::ServingEngine> loaded;
  if (!o.model_dir.empty()) {
    base.model_dir = o.model_dir;
    ASSIGN_OR_RETURN(loaded, runtime::ServingEngine::Open(base));
    base.model_dir.clear();
    base.model_weights = &loaded->weights();
  } else {
    ASSIGN_OR_RETURN(const model::ModelConfig c, model::Preset(preset));
    ASSIGN_OR_RETURN(model::ModelWeights w, model::MakeDummyModel(c, WeightFormat::kBf16, 1));
    dummy = std::make_unique<model::ModelWeights>(std::move(w));
    base.model_weights = dummy.get();
  }
  const model::ModelConfig& mc = base.model_weights->config;
  // A budget that holds 3/4 of the largest concurrency's requests in BF16: BF16 cannot admit it, FP8 can.
  const int max_c = *std::max_element(cs.begin(), cs.end());
  const size_t pages_per_request =
      runtime::KvPagesForTokens(static_cast<size_t>(prompt + output), kPageTokens);
  engine::kv::PagePoolConfig pc;
  pc.shape = model::KvShapeFor(mc);
  pc.page_tokens = kPageTokens;
  ASSIGN_OR_RETURN(const size_t bf16_page, engine::kv::ComputePageBytes(pc));
  const size_t bf16_holds = std::max<size_t>(1, static_cast<size_t>(max_c) * 3 / 4);
  const size_t kv_bytes = bf16_page * pages_per_request * bf16_holds;

  std::vector<Config> configs;
  for (KvCacheDtype kv : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
    ASSIGN_OR_RETURN(auto s, OpenEngine(base, kv, kv_bytes));
    configs.push_back({kv == KvCacheDtype::kBf16 ? "BF16 KV" : "FP8 KV", std::move(s)});
  }
  Report r;
  r.experiment = "kv-decode";
  r.title = "Decode tok/s by concurrency: BF16 vs FP8 (e4m3) KV cache";
  char intro[768];
  std::snprintf(
      intro, sizeof(intro),
      "Model %s (%s weights in bf16, dummy seed 1 unless a checkpoint), one unified engine per KV dtype "
      "over the same weights, through the real scheduler (Engine::Submit/Step). Each point: C requests "
      "of %d random prompt tokens and %d greedy output tokens submitted at once; decode tok/s = tokens "
      "emitted after every request had its first token / that phase's time; median of %d rounds, BF16 "
      "and FP8 alternating. KV budget %.2f MB: %zu requests fit in BF16, %zu in FP8 (%zu pages of %zu "
      "tokens each).",
      o.model_dir.empty() ? preset.c_str() : o.model_dir.c_str(), mc.model_type.c_str(), prompt, output,
      rounds, kv_bytes / 1e6, configs[0].serving->kv_pool().num_pages() / pages_per_request,
      configs[1].serving->kv_pool().num_pages() / pages_per_request, pages_per_request, kPageTokens);
  r.paragraphs.push_back(intro);
  r.config = {{"model", o.model_dir.empty() ? preset : o.model_dir},
              {"prompt_tokens", prompt},
              {"output_tokens", output},
              {"rounds", rounds},
              {"concurrency", cs},
              {"kv_bytes", kv_bytes},
              {"page_tokens", kPageTokens},
              {"threads", configs[0].serving->threads()}};
  ASSIGN_OR_RETURN(const auto points, Sweep(configs, cs, prompt, output, rounds, "kv-decode", &r.samples));

  static const std::vector<ProductionRow> kProduction = {
      {1, 137, 125}, {8, 731, 689}, {16, 1106, 1028}, {32, 1558, 1489}, {64, -1, 2192}};
  Table t{"",
          {"concurrent requests", "BF16 KV tok/s", "FP8 KV tok/s", "FP8/BF16", "BF16 ITL p50 ms",
           "FP8 ITL p50 ms", "production BF16", "production FP8", "production FP8/BF16"},
          {}};
  Plot plot{"Decode throughput, BF16 vs FP8 KV (" +
                (o.model_dir.empty() ? preset : std::string("checkpoint")) + ")",
            "concurrent requests",
            "decode tok/s",
            true,
            false,
            {}};
  Series sb{"BF16 KV", {}, {}, false}, sf{"FP8 KV", {}, {}, false};
  double min_ratio = 1e9, bf16_peak = 0, fp8_peak = 0;
  for (int c : cs) {
    const Point& pb = points[0].at(c);
    const Point& pf = points[1].at(c);
    const double b = pb.oom ? 0 : Median(pb.decode_tok_s), f = pf.oom ? 0 : Median(pf.decode_tok_s);
    const auto cell = [](const Point& p, double v) {
      return p.oom ? Cell{"out of memory (holds " + std::to_string(p.holds) + ")", "oom"} : Num(v, 1);
    };
    const auto prod = std::find_if(kProduction.begin(), kProduction.end(),
                                   [c](const ProductionRow& p) { return p.concurrency == c; });
    const bool have = prod != kProduction.end();
    t.rows.push_back(
        {Num(c), cell(pb, b), cell(pf, f), pb.oom || pf.oom ? Text("-") : Ratio(f / b),
         pb.oom ? Text("-") : Num(Median(pb.itl_ms), 2), pf.oom ? Text("-") : Num(Median(pf.itl_ms), 2),
         !have         ? Text("-")
         : prod->a < 0 ? Text("out of memory")
                       : Num(prod->a),
         have ? Num(prod->b) : Text("-"), have && prod->a > 0 ? Ratio(prod->b / prod->a) : Text("-")});
    if (!pb.oom) sb.x.push_back(c), sb.y.push_back(b), bf16_peak = std::max(bf16_peak, b);
    if (!pf.oom) sf.x.push_back(c), sf.y.push_back(f), fp8_peak = std::max(fp8_peak, f);
    if (!pb.oom && !pf.oom) min_ratio = std::min(min_ratio, f / b);
  }
  plot.series = {sb, sf};
  std::vector<double> px, pb, pf_x, pf;
  for (const ProductionRow& p : kProduction) {
    if (p.a > 0) px.push_back(p.concurrency), pb.push_back(p.a);
    pf_x.push_back(p.concurrency), pf.push_back(p.b);
  }
  // Production's curves scaled by one factor (its FP8 peak onto ours): the shapes compare.
  const double factor_peak = fp8_peak;
  Series ref_b = ScaledReference("production BF16", px, pb, factor_peak * 1558.0 / 2192.0);
  Series ref_f = ScaledReference("production FP8", pf_x, pf, factor_peak);
  plot.series = {sb, ref_b, sf, ref_f};
  r.tables.push_back(std::move(t));
  r.plots.push_back(std::move(plot));
  if (min_ratio < 1e9) {
    r.targets.push_back({"FP8 KV / BF16 KV decode, lowest over the concurrencies both run", min_ratio, 1.00,
                         true, "x", "0.91-0.96x"});
  }
  if (bf16_peak > 0) {
    r.targets.push_back(
        {"FP8 KV peak / BF16 KV peak", fp8_peak / bf16_peak, 1.41, true, "x", "2192 / 1558 = 1.41x"});
  }
  return r;
}

namespace {

int64_t MlpBytes(const model::MlpWeights& w) {
  return w.gate_proj.StreamedBytes() + w.up_proj.StreamedBytes() + w.down_proj.StreamedBytes();
}

// The weight bytes one decode token reads: every attention and indexer Linear, the dense MLP or
// the router + shared expert + num_experts_per_tok routed experts, lm_head.
int64_t ActiveWeightBytes(const model::ModelWeights& m) {
  int64_t bytes = m.lm_head.StreamedBytes();
  for (const model::LayerWeights& l : m.layers) {
    const model::MlaWeights& a = l.attn;
    for (const auto* p :
         {&a.q_proj, &a.q_a_proj, &a.q_b_proj, &a.kv_a_proj_with_mqa, &a.kv_b_proj, &a.o_proj})
      bytes += p->StreamedBytes();
    if (l.indexer.has_value())
      bytes += l.indexer->wq_b.StreamedBytes() + l.indexer->wk.StreamedBytes() +
               l.indexer->weights_proj.StreamedBytes();
    if (!l.is_moe) {
      bytes += MlpBytes(l.dense_mlp);
      continue;
    }
    bytes += static_cast<int64_t>(l.moe.router.size() * sizeof(float)) + MlpBytes(l.moe.shared_experts) +
             m.config.num_experts_per_tok * MlpBytes(l.moe.experts[0]);
  }
  return bytes;
}

// `configs[i]` requests of `prompt` tokens and one output token each, timed to the last finish.
StatusOr<double> PrefillTokS(runtime::ServingEngine& s, int requests, int prompt, uint64_t seed) {
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(const BatchResult b, RunBatch(s, requests, prompt, 1, seed));
  if (b.failed > 0) return Status::Internal("prefill requests did not finish by length");
  return b.prompt_tokens / std::max(1e-9, Seconds(Clock::now() - start));
}

}  // namespace

StatusOr<Report> RunWeights(const Options& o) {
  const std::vector<int> cs = Concurrencies(o);
  const int prompt = Pick(o.prompt_tokens, 32, 512, o);
  const int output = Pick(o.output_tokens, 8, 64, o);
  const int rounds = Pick(o.rounds, 1, 3, o);
  const int prefill_requests = o.quick ? 2 : 4;
  const std::string preset = !o.preset.empty() ? o.preset : o.quick ? "tiny-glm" : "bench-glm";
  const WeightFormat formats[] = {WeightFormat::kFp8Block128, WeightFormat::kInt4Group32};
  std::vector<std::unique_ptr<model::ModelWeights>> dummies;
  runtime::ServingConfig base;
  base.threads = o.threads;
  std::vector<runtime::ServingConfig> bases;
  std::vector<std::string> checkpoints;
  for (WeightFormat f : formats) {
    runtime::ServingConfig sc = base;
    if (!o.model_dir.empty()) {
      ASSIGN_OR_RETURN(const std::string dir,
                       CheckpointIn(o.model_dir, f == WeightFormat::kInt4Group32 ? "int4" : "fp8"));
      sc.model_dir = dir;
      checkpoints.push_back(dir);
    } else {
      ASSIGN_OR_RETURN(const model::ModelConfig c, model::Preset(preset));
      ASSIGN_OR_RETURN(model::ModelWeights w, model::MakeDummyModel(c, f, 1));
      dummies.push_back(std::make_unique<model::ModelWeights>(std::move(w)));
      sc.model_weights = dummies.back().get();
    }
    bases.push_back(sc);
  }
  const int max_c = *std::max_element(cs.begin(), cs.end());
  std::vector<Config> configs;
  for (size_t i = 0; i < 2; ++i) {
    // Room for every request of the largest batch (weights are the variable here, not KV).
    runtime::ServingConfig sc = bases[i];
    sc.kv_dtype = KvCacheDtype::kBf16;
    sc.page_tokens = kPageTokens;
    sc.kv_tokens =
        static_cast<size_t>(max_c + 1) *
        runtime::KvPagesForTokens(static_cast<size_t>(std::max(prompt + output, prompt)), kPageTokens) *
        kPageTokens;
    sc.scheduler.max_running_requests = 256;
    ASSIGN_OR_RETURN(auto s, runtime::ServingEngine::Open(sc));
    configs.push_back({i == 0 ? "FP8 weights" : "INT4 weights", std::move(s)});
  }
  const model::ModelWeights& w8 = configs[0].serving->weights();
  const model::ModelWeights& w4 = configs[1].serving->weights();
  const double active8 = static_cast<double>(ActiveWeightBytes(w8));
  const double active4 = static_cast<double>(ActiveWeightBytes(w4));
  const double bound = active8 / active4;

  Report r;
  r.experiment = "weights";
  r.title = "FP8 vs INT4 weights: decode tok/s by concurrency, prefill tok/s, bytes";
  const std::string model_name = o.model_dir.empty() ? preset : o.model_dir;
  char intro[768];
  std::snprintf(
      intro, sizeof(intro),
      "Model %s (%s): FP8 = every Linear but lm_head FP8 block-128; INT4 = routed experts INT4 group-32 "
      "(compressed-tensors), the rest bf16, as production's INT4 checkpoints. BF16 KV on both, a budget "
      "that admits every request. Decode: C requests of %d prompt + %d output tokens (as kv-decode); "
      "prefill: %d requests of %d tokens, 1 output token, prompt tokens / time. Median of %d rounds, the "
      "two alternating. Weight-bytes bound = active FP8 bytes / active INT4 bytes per decode token "
      "(%.2f MB / %.2f MB = %.3fx): what INT4 could gain at concurrency 1 if decode only streamed weights.",
      model_name.c_str(), w8.config.model_type.c_str(), prompt, output, prefill_requests, prompt, rounds,
      active8 / 1e6, active4 / 1e6, bound);
  r.paragraphs.push_back(intro);
  r.config = {{"model", model_name},        {"prompt_tokens", prompt},
              {"output_tokens", output},    {"rounds", rounds},
              {"concurrency", cs},          {"prefill_requests", prefill_requests},
              {"checkpoints", checkpoints}, {"threads", configs[0].serving->threads()}};
  ASSIGN_OR_RETURN(const auto points, Sweep(configs, cs, prompt, output, rounds, "weights", &r.samples));
  std::vector<double> prefill[2];
  {
    Progress progress("bench weights prefill", 2 * rounds);
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < 2; ++i) {
        ASSIGN_OR_RETURN(const double tps,
                         PrefillTokS(*configs[i].serving, prefill_requests, prompt, 77 + round));
        prefill[i].push_back(tps);
        r.samples.push_back({{"config", configs[i].name}, {"prefill_tok_s", tps}, {"round", round}});
        progress.Step(configs[i].name + " prefill");
      }
    }
  }
  static const std::vector<ProductionRow> kProduction = {
      {1, 60, 92}, {8, 425, 513}, {16, 683, 825}, {32, 994, 1267}, {64, 1672, 1933}};
  Table t{"",
          {"concurrent requests", "FP8 weights tok/s", "INT4 weights tok/s", "gain", "INT4/FP8 / bound",
           "production FP8", "production INT4", "production gain"},
          {}};
  Plot plot{"Decode throughput, FP8 vs INT4 weights (" +
                (o.model_dir.empty() ? preset : std::string("checkpoint")) + ")",
            "concurrent requests",
            "decode tok/s",
            true,
            false,
            {}};
  Series s8{"FP8 weights", {}, {}, false}, s4{"INT4 weights", {}, {}, false};
  double ratio_c1 = 0, ratio_c64 = 0, peak4 = 0;
  for (int c : cs) {
    const double a = Median(points[0].at(c).decode_tok_s), b = Median(points[1].at(c).decode_tok_s);
    const auto prod = std::find_if(kProduction.begin(), kProduction.end(),
                                   [c](const ProductionRow& p) { return p.concurrency == c; });
    const bool have = prod != kProduction.end();
    char gain[32];
    std::snprintf(gain, sizeof(gain), "%+.1f%%", (b / a - 1) * 100);
    char pgain[32] = "-";
    if (have) std::snprintf(pgain, sizeof(pgain), "%+.0f%%", (prod->b / prod->a - 1) * 100);
    t.rows.push_back({Num(c), Num(a, 1), Num(b, 1), Cell{gain, std::to_string(b / a - 1)},
                      Ratio(b / a / bound), have ? Num(prod->a) : Text("-"), have ? Num(prod->b) : Text("-"),
                      Text(pgain)});
    s8.x.push_back(c), s8.y.push_back(a), s4.x.push_back(c), s4.y.push_back(b);
    peak4 = std::max(peak4, b);
    if (c == 1) ratio_c1 = b / a;
    if (c == 64) ratio_c64 = b / a;
  }
  std::vector<double> px, p8, p4;
  for (const ProductionRow& p : kProduction)
    px.push_back(p.concurrency), p8.push_back(p.a), p4.push_back(p.b);
  plot.series = {s8, ScaledReference("production FP8", px, p8, peak4 * 1672.0 / 1933.0), s4,
                 ScaledReference("production INT4", px, p4, peak4)};
  r.tables.push_back(std::move(t));
  const double pf8 = Median(prefill[0]), pf4 = Median(prefill[1]);
  ASSIGN_OR_RETURN(const model::ModelConfig glm, model::Preset("glm-5.2"));
  const model::ModelConfig& mc = w8.config;
  Table bytes{"Prefill and bytes", {"", "FP8", "INT4", "INT4/FP8", "production (GLM 5.2)"}, {}};
  bytes.rows.push_back(
      {Text("prefill tok/s"), Num(pf8, 1), Num(pf4, 1), Ratio(pf4 / pf8), Text("10,160 -> 8,660 (0.85x)")});
  const double ck8 = static_cast<double>(model::CheckpointBytes(mc, model::WeightScheme::kFp8));
  const double ck4 = static_cast<double>(model::CheckpointBytes(mc, model::WeightScheme::kInt4));
  bytes.rows.push_back(
      {Text("checkpoint bytes"), Bytes(ck8), Bytes(ck4), Ratio(ck4 / ck8), Text("705 GB -> 421 GB (0.60x)")});
  const double rs8 = static_cast<double>(w8.ResidentBytes()), rs4 = static_cast<double>(w4.ResidentBytes());
  bytes.rows.push_back({Text("resident weight bytes"), Bytes(rs8), Bytes(rs4), Ratio(rs4 / rs8),
                        Text("~88 GB -> ~52 GB per GPU at TP8 (0.59x)")});
  bytes.rows.push_back({Text("active weight bytes / decode token"), Bytes(active8), Bytes(active4),
                        Ratio(active4 / active8), Text("-")});
  const double g8 = static_cast<double>(model::CheckpointBytes(glm, model::WeightScheme::kFp8));
  const double g4 = static_cast<double>(model::CheckpointBytes(glm, model::WeightScheme::kInt4));
  bytes.rows.push_back({Text("GLM 5.2 full size, checkpoint (this repo's memory math)"), Bytes(g8), Bytes(g4),
                        Ratio(g4 / g8), Text("705 GB -> 421 GB")});
  r.tables.push_back(std::move(bytes));
  r.plots.push_back(std::move(plot));
  r.targets.push_back({"INT4/FP8 decode at concurrency 1, as a fraction of the weight-bytes bound",
                       ratio_c1 / bound, 0.95, true, "x", "92/60 = 1.53x"});
  if (ratio_c64 > 0)
    r.targets.push_back({"INT4/FP8 decode at concurrency 64", ratio_c64, 1.16, true, "x", "1.16x"});
  r.targets.push_back({"INT4/FP8 prefill", pf4 / pf8, 0.90, true, "x", "0.85x"});
  r.samples.push_back({{"active_weight_bytes_fp8", active8},
                       {"active_weight_bytes_int4", active4},
                       {"resident_bytes_fp8", rs8},
                       {"resident_bytes_int4", rs4},
                       {"checkpoint_bytes_fp8", ck8},
                       {"checkpoint_bytes_int4", ck4}});
  return r;
}

}  // namespace tandem::tools::bench
