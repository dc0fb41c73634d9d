#include "controller/reconcile/engine_config.h"

namespace tandem::controller::reconcile {
namespace {

json ModelBlock(const CommonSpec& common) {
  json model = json::object();
  if (!common.model_path.empty()) {
    model["path"] = common.model_path;
  } else {
    model["dummy"] = {{"preset", common.dummy_preset}, {"seed", common.dummy_seed}};
  }
  return model;
}

json Base(std::string_view deployment, std::string_view role, const CommonSpec& common, int64_t http_port,
          int64_t termination_grace_seconds) {
  json config = json{
      {"role", role},
      {"deployment", deployment},
      {"pool", role},
      {"listen",
       {{"host", "0.0.0.0"},
        {"httpPort", http_port},
        {"grpcPort", kGrpcPort},
        {"metricsPort", kMetricsPort}}},
      {"model", ModelBlock(common)},
      {"integrity", {{"pageTags", common.page_tags}, {"transferChecksum", common.transfer_checksum}}},
      // The drain (preStop GET /drain, then SIGTERM) ends before the kubelet's SIGKILL.
      {"shutdownGraceMs", (termination_grace_seconds - kDrainMarginSeconds) * 1000},
  };
  if (!common.tls_secret.empty()) {
    const std::string dir(kTlsMountPath);
    config["tls"] = {{"certFile", dir + "/tls.crt"},
                     {"keyFile", dir + "/tls.key"},
                     {"caFile", dir + "/ca.crt"},
                     {"serverName", common.tls_server_name}};
  }
  return config;
}

}  // namespace

std::string ConfigMapName(std::string_view deployment) { return std::string(deployment) + "-config"; }

std::string ConfigKey(std::string_view role) { return std::string(role) + ".yaml"; }

std::string RenderPoolConfig(std::string_view deployment, const CommonSpec& common, const PoolSpec& pool) {
  json config = Base(deployment, pool.role, common, kHttpPort, pool.termination_grace_seconds);
  config["model"]["weights"] = pool.weights;
  config["kvCache"] = {{"dtype", pool.kv_cache}};
  if (pool.kv_cache_bytes > 0) config["kvCache"]["bytes"] = pool.kv_cache_bytes;
  config["engine"] = {{"tensorParallel", pool.tensor_parallel}};
  return config.dump(2) + "\n";
}

std::string RenderRouterConfig(std::string_view deployment, const CommonSpec& common, int64_t port,
                               bool forward_unknown_tool_calls) {
  json config = Base(deployment, "router", common, port, kDefaultTerminationGraceSeconds);
  if (forward_unknown_tool_calls) config["api"] = {{"unknownToolCalls", "forward"}};
  return config.dump(2) + "\n";
}

}  // namespace tandem::controller::reconcile
