#include "tools/bench/load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>

#include "tools/bench/report.h"

namespace tandem::tools::bench {
namespace {

using Clock = HttpClock;
using Json = nlohmann::json;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<double> Field(const std::vector<const RequestResult*>& ok, double RequestResult::*f) {
  std::vector<double> v;
  for (const RequestResult* r : ok) v.push_back(r->*f);
  return v;
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Std(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

void AddStats(const std::string& name, std::vector<double> seconds, Json* out) {
  for (double& x : seconds) x *= 1e3;
  (*out)["mean_" + name + "_ms"] = Mean(seconds);
  (*out)["median_" + name + "_ms"] = Median(seconds);
  (*out)["std_" + name + "_ms"] = Std(seconds);
  for (int p : {50, 90, 95, 99})
    (*out)["p" + std::to_string(p) + "_" + name + "_ms"] = Percentile(seconds, p);
}

}  // namespace

RequestResult StreamCompletion(const Endpoint& endpoint, const std::string& model,
                               const std::vector<int>& prompt, int max_tokens, double timeout_s) {
  RequestResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  const Json body = {{"model", model},
                     {"prompt", prompt},
                     {"max_tokens", max_tokens},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string pending, error_body;
  double last_text = -1;
  int64_t events = 0, usage_tokens = -1;
  bool done = false;
  const StatusOr<int> status =
      HttpExchange(endpoint, "POST", endpoint.CompletionsPath(), body.dump(), deadline,
                   [&](int http, const std::string& data) {
                     const double now = Since(start);
                     if (http != 200) {
                       if (error_body.size() < 4096) error_body += data;
                       return;
                     }
                     pending += data;
                     size_t end;
                     // Events end at a blank line; each "data: " line is one JSON chunk or [DONE].
                     while ((end = pending.find("\n\n")) != std::string::npos) {
                       std::string event = pending.substr(0, end);
                       pending.erase(0, end + 2);
                       if (!event.empty() && event.back() == '\r') event.pop_back();
                       if (event.rfind("data:", 0) != 0) continue;
                       std::string payload = event.substr(5);
                       if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
                       if (payload == "[DONE]") {
                         done = true;
                         continue;
                       }
                       const Json chunk = Json::parse(payload, nullptr, false);
                       if (chunk.is_discarded()) continue;
                       if (chunk.contains("usage") && chunk["usage"].is_object()) {
                         usage_tokens = chunk["usage"].value("completion_tokens", int64_t{-1});
                       }
                       const Json* choices = chunk.contains("choices") ? &chunk["choices"] : nullptr;
                       if (choices == nullptr || !choices->is_array() || choices->empty()) continue;
                       const Json& c = (*choices)[0];
                       const bool text = c.contains("text") && c["text"].is_string() &&
                                         !c["text"].get<std::string>().empty();
                       // Events with text are what a reader sees arrive; a bare finishing chunk is not a
                       // token.
                       if (!text) continue;
                       ++events;
                       if (last_text < 0) {
                         r.ttft_s = now;
                       } else {
                         r.itl.push_back(now - last_text);
                       }
                       last_text = now;
                     }
                   });
  r.e2e_s = Since(start);
  if (!status.ok()) {
    r.error = status.status().ToString();
    return r;
  }
  if (*status != 200) {
    r.error = "HTTP " + std::to_string(*status) + ": " + error_body.substr(0, 512);
    return r;
  }
  if (!done) {
    r.error = "the stream ended without [DONE]";
    return r;
  }
  if (events == 0) {
    r.error = "the stream carried no text";
    return r;
  }
  r.output_tokens = usage_tokens >= 0 ? usage_tokens : events;
  r.ok = true;
  return r;
}

LoadRun RunLoad(const Endpoint& endpoint, const LoadSpec& spec) {
  // Every request is drawn before the clock starts: lengths, prompt ids and (open loop) arrivals.
  std::mt19937_64 rng(spec.seed);
  auto length = [&](int n, double spread) {
    const int lo = std::max(1, static_cast<int>(std::lround(n * (1 - spread))));
    const int hi = std::max(lo, static_cast<int>(std::lround(n * (1 + spread))));
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  struct Planned {
    std::vector<int> prompt;
    int max_tokens = 0;
    double arrival_s = 0;
  };
  std::vector<Planned> plan(static_cast<size_t>(spec.num_requests));
  std::uniform_int_distribution<int> token(10, std::max(11, spec.max_token_id) - 1);
  std::exponential_distribution<double> gap(spec.rate > 0 ? spec.rate : 1.0);
  double t = 0;
  for (Planned& p : plan) {
    p.prompt.resize(static_cast<size_t>(length(spec.prompt_tokens, spec.input_spread)));
    for (int& id : p.prompt) id = token(rng);
    p.max_tokens = length(spec.output_tokens, spec.output_spread);
    if (spec.rate > 0) {
      p.arrival_s = t;
      t += gap(rng);
    }
  }
  LoadRun run;
  run.requests.resize(plan.size());
  const Clock::time_point start = Clock::now();
  auto issue = [&](size_t i) {
    const double at = Since(start);
    RequestResult r =
        StreamCompletion(endpoint, spec.model, plan[i].prompt, plan[i].max_tokens, spec.timeout_s);
    r.start_s = at;
    run.requests[i] = std::move(r);
  };
  std::vector<std::thread> threads;
  if (spec.rate > 0) {
    threads.reserve(plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(plan[i].arrival_s)));
      threads.emplace_back(issue, i);
    }
  } else {
    std::atomic<size_t> next{0};
    const int workers = std::max(1, std::min(spec.concurrency, spec.num_requests));
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < plan.size(); i = next++) issue(i);
      });
    }
  }
  for (std::thread& th : threads) th.join();
  run.duration_s = Since(start);
  return run;
}

Json Summarize(const LoadRun& run, const Slo& slo) {
  std::vector<const RequestResult*> ok;
  int64_t input = 0, output = 0, good = 0;
  std::vector<double> tpot, itl;
  Json errors = Json::array();
  for (const RequestResult& r : run.requests) {
    if (!r.ok) {
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ok.push_back(&r);
    input += r.prompt_tokens;
    output += r.output_tokens;
    const double request_tpot =
        r.output_tokens > 1 ? (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1) : 0;
    if (r.output_tokens > 1) tpot.push_back(request_tpot);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
    // vLLM's goodput: TTFT, TPOT (its "itl"-style per-token SLO) and e2e, each when given.
    const bool meets = (slo.ttft_s <= 0 || r.ttft_s <= slo.ttft_s) &&
                       (slo.itl_s <= 0 || request_tpot <= slo.itl_s) &&
                       (slo.e2e_s <= 0 || r.e2e_s <= slo.e2e_s);
    good += meets ? 1 : 0;
  }
  const double d = run.duration_s > 0 ? run.duration_s : 1;
  Json s = {{"completed", ok.size()},
            {"failed", run.requests.size() - ok.size()},
            {"duration", run.duration_s},
            {"total_input_tokens", input},
            {"total_output_tokens", output},
            {"request_throughput", static_cast<double>(ok.size()) / d},
            {"output_throughput", static_cast<double>(output) / d},
            {"total_token_throughput", static_cast<double>(input + output) / d},
            {"request_goodput", static_cast<double>(good) / d},
            {"errors", errors}};
  AddStats("ttft", Field(ok, &RequestResult::ttft_s), &s);
  AddStats("tpot", tpot, &s);
  AddStats("itl", itl, &s);
  AddStats("e2el", Field(ok, &RequestResult::e2e_s), &s);
  return s;
}

}  // namespace tandem::tools::bench
