#include "agent/metrics/agent_metrics.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/kv/integrity_tracker.h"
#include "engine/runtime/request_types.h"

namespace tandem::agent::metrics {
namespace {

using engine::runtime::EngineStats;
using engine::runtime::FinishReason;

// prometheus-cpp prints the constant labels first (sorted), then the series' own label.
constexpr const char* kLabels = R"(deployment="d",pool="p",role="decode")";

// name{deployment="d",pool="p",role="decode"[,extra]}
std::string Series(const std::string& name, const std::string& extra = "") {
  return name + "{" + kLabels + (extra.empty() ? "" : "," + extra) + "}";
}

// The sample line of `series` from an exposition, or "" when absent.
std::string Line(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return text.substr(at, text.find('\n', at) - at);
    ++at;
  }
  return "";
}

// The value printed on the sample line of `series`, or "" when absent.
std::string Value(const std::string& text, const std::string& series) {
  const std::string line = Line(text, series);
  return line.empty() ? "" : line.substr(series.size() + 1);
}

constexpr const char* kGauges[] = {"tandem_kv_cache_usage_ratio", "tandem_kv_cache_capacity_tokens",
                                   "tandem_kv_cache_used_tokens", "tandem_requests_running",
                                   "tandem_requests_waiting",     "tandem_prefill_tokens_waiting",
                                   "tandem_prefix_cache_tokens"};
constexpr const char* kCounters[] = {
    "tandem_kv_integrity_pages_checked_total", "tandem_prompt_tokens_total",
    "tandem_generation_tokens_total",          "tandem_prefix_cache_queries_total",
    "tandem_prefix_cache_hits_total",          "tandem_tool_calls_dropped_total"};
constexpr const char* kHistograms[] = {"tandem_time_to_first_token_seconds",
                                       "tandem_inter_token_latency_seconds",
                                       "tandem_e2e_request_latency_seconds", "tandem_kv_transfer_seconds"};

// Every label value a labelled counter family must show from construction.
std::vector<std::pair<std::string, std::string>> LabelledCounters() {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < engine::kv::kNumMismatchReasons; ++i) {
    out.emplace_back("tandem_kv_integrity_aborts_total",
                     std::string("reason=\"") +
                         engine::kv::MismatchReasonName(static_cast<engine::kv::MismatchReason>(i)) + "\"");
  }
  for (size_t i = 0; i <= static_cast<size_t>(FinishReason::kRejected); ++i) {
    out.emplace_back("tandem_requests_finished_total",
                     "reason=\"" + std::string(FinishReasonName(static_cast<FinishReason>(i))) + "\"");
  }
  for (size_t i = 0; i < kNumTransferFailures; ++i) {
    out.emplace_back("tandem_kv_transfer_failures_total",
                     "reason=\"" + std::string(TransferFailureName(static_cast<TransferFailure>(i))) + "\"");
  }
  out.emplace_back("tandem_kv_transfer_bytes_total", R"(direction="in")");
  out.emplace_back("tandem_kv_transfer_bytes_total", R"(direction="out")");
  return out;
}

TEST(AgentMetricsTest, EverySeriesIsPresentAtZeroFromConstruction) {
  AgentMetrics m("d", "p", "decode");
  const std::string t = m.Serialize();
  for (const char* name : kGauges) {
    EXPECT_EQ(Line(t, Series(name)), Series(name) + " 0") << t;
    EXPECT_NE(t.find(std::string("# TYPE ") + name + " gauge\n"), std::string::npos) << name;
  }
  for (const char* name : kCounters) {
    EXPECT_EQ(Line(t, Series(name)), Series(name) + " 0") << name;
    EXPECT_NE(t.find(std::string("# TYPE ") + name + " counter\n"), std::string::npos) << name;
  }
  for (const auto& [name, label] : LabelledCounters()) {
    EXPECT_EQ(Line(t, Series(name, label)), Series(name, label) + " 0") << name << " " << label;
    EXPECT_NE(t.find("# TYPE " + name + " counter\n"), std::string::npos) << name;
  }
  for (const char* name : kHistograms) {
    const std::string n = name;
    EXPECT_EQ(Line(t, Series(n + "_count")), Series(n + "_count") + " 0") << name;
    EXPECT_EQ(Line(t, Series(n + "_sum")), Series(n + "_sum") + " 0") << name;
    EXPECT_EQ(Line(t, Series(n + "_bucket", R"(le="+Inf")")), Series(n + "_bucket", R"(le="+Inf")") + " 0");
    EXPECT_NE(t.find("# TYPE " + n + " histogram\n"), std::string::npos) << name;
  }
  // Every sample carries the three labels, and every family has a HELP text.
  size_t families = 0;
  for (size_t at = 0, end; at < t.size(); at = end + 1) {
    end = t.find('\n', at);
    const std::string line = t.substr(at, end - at);
    if (line.rfind("# HELP ", 0) == 0) {
      ++families;
      EXPECT_GT(line.size(), line.find(' ', 7) + 10) << line;  // more than a word of help
    } else if (line[0] != '#') {
      EXPECT_NE(line.find(kLabels), std::string::npos) << line;
    }
  }
  // The list in ARCHITECTURE.md, "Metric names", tandem_prefill_tokens_waiting (the prefill
  // pool's autoscaling signal, docs/autoscaling.md), tandem_prefix_cache_tokens (docs/agent.md)
  // and tandem_tool_calls_dropped_total (docs/agent-config.md).
  EXPECT_EQ(families, 21u);
}

TEST(AgentMetricsTest, TransferFailureNamesAreDistinctSnakeCase) {
  std::set<std::string> names;
  for (size_t i = 0; i < kNumTransferFailures; ++i) {
    const std::string name(TransferFailureName(static_cast<TransferFailure>(i)));
    EXPECT_NE(name, "unknown");
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kNumTransferFailures);
  EXPECT_EQ(TransferFailureName(TransferFailure::kTimeout), "timeout");
  EXPECT_EQ(TransferFailureName(TransferFailure::kLateWrite), "late_write");
  EXPECT_EQ(TransferFailureName(TransferFailure::kRefusedWrite), "refused_write");
}

TEST(AgentMetricsTest, EngineCountersAdvanceByDeltas) {
  AgentMetrics m("d", "p", "decode");
  EngineStats s;
  s.finished[static_cast<size_t>(FinishReason::kStop)] = 3;
  s.finished[static_cast<size_t>(FinishReason::kAbort)] = 1;
  s.integrity_pages_checked = 100;
  s.integrity_aborts[static_cast<size_t>(engine::kv::MismatchReason::kTransferTag)] = 2;
  s.prompt_tokens = 40;
  s.generation_tokens = 7;
  s.prefix_cache_queries = 5;
  s.prefix_cache_hits = 2;
  s.import_bytes = 1 << 20;
  s.export_bytes = 4096;
  m.UpdateFromEngine(s);
  m.UpdateFromEngine(s);  // the same snapshot again adds nothing
  s.finished[static_cast<size_t>(FinishReason::kStop)] = 5;
  s.integrity_pages_checked = 250;
  s.prompt_tokens = 100;
  s.generation_tokens = 20;
  s.prefix_cache_queries = 6;
  s.import_bytes += 8192;
  m.UpdateFromEngine(s);
  m.CountDroppedToolCalls(2);
  m.CountDroppedToolCalls(0);
  m.CountDroppedToolCalls(1);
  const std::string t = m.Serialize();
  EXPECT_EQ(Value(t, Series("tandem_tool_calls_dropped_total")), "3");
  EXPECT_EQ(Value(t, Series("tandem_requests_finished_total", R"(reason="stop")")), "5");
  EXPECT_EQ(Value(t, Series("tandem_requests_finished_total", R"(reason="abort")")), "1");
  EXPECT_EQ(Value(t, Series("tandem_requests_finished_total", R"(reason="length")")), "0");
  EXPECT_EQ(Value(t, Series("tandem_kv_integrity_pages_checked_total")), "250");
  EXPECT_EQ(Value(t, Series("tandem_kv_integrity_aborts_total", R"(reason="transfer_tag")")), "2");
  EXPECT_EQ(Value(t, Series("tandem_kv_integrity_aborts_total", R"(reason="generation")")), "0");
  EXPECT_EQ(Value(t, Series("tandem_prompt_tokens_total")), "100");
  EXPECT_EQ(Value(t, Series("tandem_generation_tokens_total")), "20");
  EXPECT_EQ(Value(t, Series("tandem_prefix_cache_queries_total")), "6");
  EXPECT_EQ(Value(t, Series("tandem_prefix_cache_hits_total")), "2");
  EXPECT_EQ(Value(t, Series("tandem_kv_transfer_bytes_total", R"(direction="in")")), "1056768");
  EXPECT_EQ(Value(t, Series("tandem_kv_transfer_bytes_total", R"(direction="out")")), "4096");
}

TEST(AgentMetricsTest, ALowerSnapshotResyncsWithoutGoingBack) {
  AgentMetrics m("d", "p", "decode");
  EngineStats old_engine;
  old_engine.prompt_tokens = 1000;
  old_engine.finished[static_cast<size_t>(FinishReason::kLength)] = 10;
  m.UpdateFromEngine(old_engine);
  EngineStats new_engine;  // e.g. the engine was rebuilt: its counters start again from 0
  new_engine.prompt_tokens = 30;
  new_engine.finished[static_cast<size_t>(FinishReason::kLength)] = 1;
  m.UpdateFromEngine(new_engine);
  std::string t = m.Serialize();
  EXPECT_EQ(Value(t, Series("tandem_prompt_tokens_total")), "1000");
  EXPECT_EQ(Value(t, Series("tandem_requests_finished_total", R"(reason="length")")), "10");
  new_engine.prompt_tokens = 50;  // from the new baseline on, deltas count again
  new_engine.finished[static_cast<size_t>(FinishReason::kLength)] = 4;
  m.UpdateFromEngine(new_engine);
  t = m.Serialize();
  EXPECT_EQ(Value(t, Series("tandem_prompt_tokens_total")), "1020");
  EXPECT_EQ(Value(t, Series("tandem_requests_finished_total", R"(reason="length")")), "13");
}

TEST(AgentMetricsTest, GaugesAndUsageRatioFollowTheLatestSnapshot) {
  AgentMetrics m("d", "p", "decode");
  EngineStats s;
  s.kv_capacity_tokens = 4096;
  s.kv_used_tokens = 1024;
  s.running = 3;
  s.waiting = 9;
  s.prefill_tokens_waiting = 700;
  s.pages_total = 256;  // 16-token pages
  s.prefix_cache_pages = 5;
  m.UpdateFromEngine(s);
  std::string t = m.Serialize();
  EXPECT_EQ(Value(t, Series("tandem_prefill_tokens_waiting")), "700");
  EXPECT_EQ(Value(t, Series("tandem_prefix_cache_tokens")), "80");
  EXPECT_EQ(Value(t, Series("tandem_kv_cache_usage_ratio")), "0.25");
  EXPECT_EQ(Value(t, Series("tandem_kv_cache_capacity_tokens")), "4096");
  EXPECT_EQ(Value(t, Series("tandem_kv_cache_used_tokens")), "1024");
  EXPECT_EQ(Value(t, Series("tandem_requests_running")), "3");
  EXPECT_EQ(Value(t, Series("tandem_requests_waiting")), "9");
  s.kv_used_tokens = 0;
  s.running = 0;
  m.UpdateFromEngine(s);  // gauges go down as well as up
  t = m.Serialize();
  EXPECT_EQ(Value(t, Series("tandem_kv_cache_usage_ratio")), "0");
  EXPECT_EQ(Value(t, Series("tandem_requests_running")), "0");
  s.kv_capacity_tokens = 0;  // no pool: 0, never NaN
  s.kv_used_tokens = 16;
  m.UpdateFromEngine(s);
  EXPECT_EQ(Value(m.Serialize(), Series("tandem_kv_cache_usage_ratio")), "0");
}

TEST(AgentMetricsTest, RouterSetsRequestsAndCountsEveryFinishReason) {
  AgentMetrics m("d", "p", "router");
  m.SetRequests(4, 2);
  for (size_t i = 0; i <= static_cast<size_t>(FinishReason::kRejected); ++i) {
    for (size_t n = 0; n <= i; ++n) m.CountFinished(static_cast<FinishReason>(i));
  }
  const std::string t = m.Serialize();
  const std::string labels = R"(deployment="d",pool="p",role="router")";
  EXPECT_EQ(Value(t, "tandem_requests_running{" + labels + "}"), "4");
  EXPECT_EQ(Value(t, "tandem_requests_waiting{" + labels + "}"), "2");
  for (size_t i = 0; i <= static_cast<size_t>(FinishReason::kRejected); ++i) {
    const std::string reason(FinishReasonName(static_cast<FinishReason>(i)));
    EXPECT_EQ(Value(t, "tandem_requests_finished_total{" + labels + ",reason=\"" + reason + "\"}"),
              std::to_string(i + 1))
        << reason;
  }
}

TEST(AgentMetricsTest, OnlyARouterHasMemberSeries) {
  AgentMetrics router("d", "p", "router");
  router.SetRouterMembers(MemberPool::kPrefill, 2, 1);
  router.SetRouterMembers(MemberPool::kDecode, 3, 0);
  const std::string t = router.Serialize();
  const std::string labels = R"(deployment="d",pool="p",role="router",)";
  EXPECT_EQ(Value(t, "tandem_router_members{" + labels + R"(state="ready",target_pool="prefill"})"), "2");
  EXPECT_EQ(Value(t, "tandem_router_members{" + labels + R"(state="not_ready",target_pool="prefill"})"), "1");
  EXPECT_EQ(Value(t, "tandem_router_members{" + labels + R"(state="ready",target_pool="decode"})"), "3");
  EXPECT_EQ(Value(t, "tandem_router_members{" + labels + R"(state="not_ready",target_pool="decode"})"), "0");
  AgentMetrics decode("d", "p", "decode");
  decode.SetRouterMembers(MemberPool::kDecode, 3, 0);  // a no-op
  EXPECT_EQ(decode.Serialize().find("tandem_router_members"), std::string::npos);
}

TEST(AgentMetricsTest, TransferFailuresComeFromTheEngineAndTheAgent) {
  AgentMetrics m("d", "p", "decode");
  EngineStats s;
  s.imports_timed_out = 2;
  s.late_transfer_writes = 5;
  s.refused_transfer_writes = 1;
  s.imports_failed = 9;   // tag/digest mismatches: the agent counts those itself
  s.imports_aborted = 9;  // likewise aborts
  m.UpdateFromEngine(s);
  m.CountTransferFailure(TransferFailure::kDigestMismatch);
  m.CountTransferFailure(TransferFailure::kPeerUnavailable);
  m.CountTransferFailure(TransferFailure::kPeerUnavailable);
  m.CountTransferFailure(TransferFailure::kTimeout);  // an export deadline the agent saw
  s.late_transfer_writes = 6;
  m.UpdateFromEngine(s);
  const std::string t = m.Serialize();
  auto failures = [&t](const char* reason) {
    return Value(t, Series("tandem_kv_transfer_failures_total", std::string("reason=\"") + reason + "\""));
  };
  EXPECT_EQ(failures("timeout"), "3");
  EXPECT_EQ(failures("late_write"), "6");
  EXPECT_EQ(failures("refused_write"), "1");
  EXPECT_EQ(failures("digest_mismatch"), "1");
  EXPECT_EQ(failures("peer_unavailable"), "2");
  EXPECT_EQ(failures("tag_mismatch"), "0");
  EXPECT_EQ(failures("aborted"), "0");
}

TEST(AgentMetricsTest, HistogramsCountObservationsIntoTheirBuckets) {
  AgentMetrics m("d", "p", "decode");
  m.ObserveTimeToFirstToken(0.0008);  // under the 1 ms bucket
  m.ObserveTimeToFirstToken(0.3);
  m.ObserveTimeToFirstToken(200);  // past the last bucket: only +Inf
  m.ObserveInterTokenLatency(0.0004);
  m.ObserveInterTokenLatency(0.02);
  m.ObserveE2eLatency(100);
  m.ObserveTransfer(0.00005);
  m.ObserveTransfer(29);
  const std::string t = m.Serialize();
  auto bucket = [&t](const std::string& name, const std::string& le) {
    return Value(t, Series(name + "_bucket", "le=\"" + le + "\""));
  };
  const std::string ttft = "tandem_time_to_first_token_seconds";
  EXPECT_EQ(bucket(ttft, "0.001"), "1");
  EXPECT_EQ(bucket(ttft, "0.25"), "1");
  EXPECT_EQ(bucket(ttft, "0.5"), "2");
  EXPECT_EQ(bucket(ttft, "120"), "2");
  EXPECT_EQ(bucket(ttft, "+Inf"), "3");
  EXPECT_EQ(Value(t, Series(ttft + "_count")), "3");
  const std::string itl = "tandem_inter_token_latency_seconds";
  EXPECT_EQ(bucket(itl, "0.0005"), "1");
  EXPECT_EQ(bucket(itl, "0.025"), "2");
  EXPECT_EQ(bucket(itl, "5"), "2");
  EXPECT_EQ(Value(t, Series(itl + "_count")), "2");
  const std::string e2e = "tandem_e2e_request_latency_seconds";
  EXPECT_EQ(bucket(e2e, "80"), "0");
  EXPECT_EQ(bucket(e2e, "120"), "1");
  EXPECT_EQ(Value(t, Series(e2e + "_sum")), "100");
  const std::string transfer = "tandem_kv_transfer_seconds";
  EXPECT_EQ(bucket(transfer, "0.0001"), "1");
  EXPECT_EQ(bucket(transfer, "10"), "1");
  EXPECT_EQ(bucket(transfer, "30"), "2");
  EXPECT_EQ(Value(t, Series(transfer + "_count")), "2");
}

TEST(AgentMetricsTest, ConcurrentUpdatesAreAllCounted) {
  AgentMetrics m("d", "p", "decode");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&m] {
      for (int n = 0; n < kPerThread; ++n) {
        m.CountFinished(FinishReason::kStop);
        m.ObserveInterTokenLatency(0.01);
      }
    });
  }
  threads.emplace_back([&m] {  // one engine step thread feeding growing snapshots, and scrapes
    EngineStats s;
    for (int n = 1; n <= kPerThread; ++n) {
      s.generation_tokens = static_cast<uint64_t>(n);
      m.UpdateFromEngine(s);
      if (n % 100 == 0) {
        EXPECT_FALSE(m.Serialize().empty());
      }
    }
  });
  for (std::thread& t : threads) t.join();
  const std::string t = m.Serialize();
  EXPECT_EQ(Value(t, Series("tandem_requests_finished_total", R"(reason="stop")")),
            std::to_string(kThreads * kPerThread));
  EXPECT_EQ(Value(t, Series("tandem_inter_token_latency_seconds_count")),
            std::to_string(kThreads * kPerThread));
  EXPECT_EQ(Value(t, Series("tandem_generation_tokens_total")), std::to_string(kPerThread));
}

// promtool (Debian package `prometheus`) lints the exposition: names, HELP/TYPE, histogram
// series, counter suffixes, units.
TEST(AgentMetricsTest, PromtoolAcceptsTheExposition) {
#ifndef TANDEM_PROMTOOL
  GTEST_SKIP() << "promtool not found at configure time (apt-get install prometheus)";
#else
  AgentMetrics m("kimi", "kimi-decode", "decode");
  EngineStats s;
  s.kv_capacity_tokens = 1000;
  s.kv_used_tokens = 300;
  s.finished[0] = 2;
  s.import_bytes = 12345;
  s.late_transfer_writes = 1;
  m.UpdateFromEngine(s);
  m.CountTransferFailure(TransferFailure::kTagMismatch);
  m.ObserveTimeToFirstToken(0.05);
  m.ObserveInterTokenLatency(0.01);
  m.ObserveE2eLatency(2);
  m.ObserveTransfer(0.2);
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string stem = (dir / ("tandem_agent_metrics_" + std::to_string(getpid()))).string();
  std::ofstream(stem + ".prom") << m.Serialize();
  const std::string cmd =
      std::string(TANDEM_PROMTOOL) + " check metrics < " + stem + ".prom > " + stem + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(stem + ".out");
  std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove((stem + ".prom").c_str());
  std::remove((stem + ".out").c_str());
  EXPECT_EQ(rc, 0) << report;
  EXPECT_EQ(report, "");  // no lint warnings either
#endif
}

}  // namespace
}  // namespace tandem::agent::metrics
