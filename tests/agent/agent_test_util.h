#pragma once
// In-process agent stacks for tests: the tiny model made once per test binary, agents on
// loopback port 0, and a reader of Prometheus text.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "tests/agent/http_test_client.h"
#include "tools/local_support.h"
#include "tools/make_model.h"

namespace tandem::agent::testing {

// The tiny Kimi-shaped model (tandem make-model), made on first use in a temp directory.
inline const std::string& TinyModelDir() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() /
                           ("tandem_agent_test_" + std::to_string(::getpid())) / "tiny")
                              .string();
    tools::MakeModelOptions mm;
    mm.out_dir = d;
    mm.seed = 7;
    mm.threads = 1;
    auto r = tools::MakeModel(mm);
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
    }
    return d;
  }();
  return dir;
}

inline std::string ModelIn(const std::string& weights) {
  auto dir = tools::CheckpointIn(TinyModelDir(), weights);
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  return dir.ok() ? *dir : std::string();
}

inline AgentConfig BaseConfig(Role role, const std::string& weights = "bf16",
                              const std::string& kv = "bf16") {
  AgentConfig c;
  c.role = role;
  c.pool = std::string(RoleName(role));
  c.deployment = "test";
  c.listen_host = "127.0.0.1";
  c.http_port = c.grpc_port = c.metrics_port = 0;
  c.served_model_name = "tiny";
  c.threads = 1;
  c.kv_cache_bytes = 64u << 20;
  c.fault_injection = true;
  c.refresh_ms = 50;
  if (role != Role::kRouter) {
    c.model_path = ModelIn(weights);
    c.weights = *engine::ParseWeightFormat(weights);
    c.kv_cache = *engine::ParseKvCacheDtype(kv);
  } else {
    c.model_path = TinyModelDir();
  }
  return c;
}

inline bool WaitReady(const Agent& agent, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (agent.Ready().ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

struct Stack {
  std::unique_ptr<Agent> prefill, decode, router;
};

struct StackOptions {
  std::string prefill_weights = "bf16", prefill_kv = "bf16", decode_weights = "bf16", decode_kv = "bf16";
  uint64_t transfer_timeout_ms = 30'000;
  bool prefix_cache = true;
};

inline Stack StartStack(const StackOptions& o) {
  Stack s;
  AgentConfig p = BaseConfig(Role::kPrefill, o.prefill_weights, o.prefill_kv);
  AgentConfig d = BaseConfig(Role::kDecode, o.decode_weights, o.decode_kv);
  p.transfer_timeout_ms = d.transfer_timeout_ms = o.transfer_timeout_ms;
  p.prefix_cache = o.prefix_cache;
  auto prefill = Agent::Start(p);
  auto decode = Agent::Start(d);
  EXPECT_TRUE(prefill.ok()) << prefill.status().ToString();
  EXPECT_TRUE(decode.ok()) << decode.status().ToString();
  if (!prefill.ok() || !decode.ok()) return s;
  s.prefill = std::move(*prefill);
  s.decode = std::move(*decode);
  AgentConfig r = BaseConfig(Role::kRouter);
  r.transfer_timeout_ms = o.transfer_timeout_ms;
  r.prefill_endpoints = {"127.0.0.1:" + std::to_string(s.prefill->grpc_port())};
  r.decode_endpoints = {"127.0.0.1:" + std::to_string(s.decode->grpc_port())};
  auto router = Agent::Start(r);
  EXPECT_TRUE(router.ok()) << router.status().ToString();
  if (!router.ok()) return s;
  s.router = std::move(*router);
  EXPECT_TRUE(WaitReady(*s.prefill) && WaitReady(*s.decode) && WaitReady(*s.router))
      << s.router->Ready().ToString();
  return s;
}

// The value of the first sample of `name` whose labels contain `labels` (e.g. `reason="abort"`);
// -1 when there is none.
inline double MetricValue(const std::string& text, const std::string& name, const std::string& labels = "") {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    if (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' ') continue;
    if (!labels.empty() && line.find(labels) == std::string::npos) continue;
    return std::atof(line.substr(line.rfind(' ') + 1).c_str());
  }
  return -1;
}

inline std::string Metrics(const Agent& agent) {
  return HttpCall(agent.metrics_port(), "GET", "/metrics").body;
}

// Polls `agent`'s /metrics until the sample reaches at least `at_least` (or 10 s pass); returns
// the last value read.
inline double WaitMetricAtLeast(const Agent& agent, const std::string& name, const std::string& labels,
                                double at_least) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double v = -1;
  while (std::chrono::steady_clock::now() < until) {
    v = MetricValue(Metrics(agent), name, labels);
    if (v >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return v;
}

}  // namespace tandem::agent::testing
