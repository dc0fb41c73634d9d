// tandem-agent: the per-node process (roles router, prefill, decode, standalone; docs/agent.md).
//
//   tandem-agent [--config FILE] [--role ROLE] [flags...] [--check-config]
// Flags override the file (the controller passes --config and --role). SIGTERM or SIGINT drains
// (as GET /drain on the metrics port does, the pod's preStop hook): admission stops, readiness
// turns false, in-flight requests get shutdownGraceMs from the drain's start to finish, the rest
// fail, exit 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <pthread.h>
#include <signal.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "common/logging.h"
#include "engine/core/cpu_features.h"

namespace {

using tandem::Status;
using tandem::StatusOr;
using tandem::agent::AgentConfig;

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: tandem-agent [--config FILE] [--role router|prefill|decode|standalone] [flags] "
      "[--check-config]\n"
      "  --config FILE            agent configuration (YAML; docs/agent-config.md)\n"
      "  --check-config           validate the configuration, print it, and exit\n"
      "  --host ADDR              listen address (default 0.0.0.0)\n"
      "  --http-port N --grpc-port N --metrics-port N   (0: any free port)\n"
      "  --model DIR | --dummy PRESET     the model (not for routers, which read only its tokenizer)\n"
      "  --name NAME              the served model name\n"
      "  --weights bf16|fp8|int4  --kv-cache bf16|fp8_e4m3  --kv-cache-bytes N\n"
      "  --threads N              forward-pass threads\n"
      "  --tensor-parallel N      ranks the model is sharded over (power of two, 1..64)\n"
      "  --prefill HOST:PORT --decode HOST:PORT   router: pool members (repeatable)\n"
      "  --prefill-members-file F --decode-members-file F   router: host:port lines, re-read\n"
      "  --refresh-ms N           router: member poll period (default 500)\n"
      "  --api-key KEY:TENANT     accept this API key (repeatable)\n"
      "  --tls-cert F --tls-key F --tls-ca F   mutual TLS on gRPC (PEM files, re-read on rotation)\n"
      "  --tls-server-name NAME   the name peers' certificates carry (default: the dialed host)\n"
      "  --deployment NAME --pool NAME            metric labels\n"
      "  --transfer-timeout-ms N  --shutdown-grace-ms N\n"
      "  --no-page-tags           integrity off (page tags are on by default)\n"
      "  --no-transfer-checksum   KV transfers unchecksummed (on by default)\n"
      "  --no-prefix-cache        no prefix sharing on prefill members\n"
      "  --forward-unknown-tool-calls   pass on tool calls naming a function the request did not\n"
      "                           offer (api.unknownToolCalls: forward; by default they are dropped)\n"
      "  --enable-fault-injection honour x-tandem-fault (tests only)\n");
}

// Parses an unsigned integer flag value; false on garbage.
bool ParseU64(const char* text, uint64_t* out) {
  char* end = nullptr;
  if (text[0] == '\0' || text[0] == '-') return false;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (*end != '\0') return false;
  *out = v;
  return true;
}

Status ApplyFlag(const std::string& flag, const char* value, AgentConfig* c) {
  uint64_t n = 0;
  auto need_u64 = [&](uint64_t lo, uint64_t hi) -> Status {
    if (!ParseU64(value, &n) || n < lo || n > hi) {
      return Status::InvalidArgument(flag + ": must be an integer in " + std::to_string(lo) + ".." +
                                     std::to_string(hi));
    }
    return Status::Ok();
  };
  if (flag == "--role") {
    ASSIGN_OR_RETURN(c->role, tandem::agent::ParseRole(value));
  } else if (flag == "--host") {
    c->listen_host = value;
  } else if (flag == "--http-port") {
    RETURN_IF_ERROR(need_u64(0, 65535));
    c->http_port = static_cast<uint16_t>(n);
  } else if (flag == "--grpc-port") {
    RETURN_IF_ERROR(need_u64(0, 65535));
    c->grpc_port = static_cast<uint16_t>(n);
  } else if (flag == "--metrics-port") {
    RETURN_IF_ERROR(need_u64(0, 65535));
    c->metrics_port = static_cast<uint16_t>(n);
  } else if (flag == "--model") {
    c->model_path = value;
  } else if (flag == "--dummy") {
    c->dummy_preset = value;
  } else if (flag == "--name") {
    c->served_model_name = value;
  } else if (flag == "--weights") {
    ASSIGN_OR_RETURN(c->weights, tandem::engine::ParseWeightFormat(value));
  } else if (flag == "--kv-cache") {
    ASSIGN_OR_RETURN(c->kv_cache, tandem::engine::ParseKvCacheDtype(value));
  } else if (flag == "--kv-cache-bytes") {
    RETURN_IF_ERROR(need_u64(1, ~uint64_t{0}));
    c->kv_cache_bytes = n;
  } else if (flag == "--threads") {
    RETURN_IF_ERROR(need_u64(0, 256));
    c->threads = static_cast<int>(n);
  } else if (flag == "--tensor-parallel") {
    RETURN_IF_ERROR(need_u64(1, 64));
    if ((n & (n - 1)) != 0)
      return Status::InvalidArgument(std::string("--tensor-parallel ") + value + ": not a power of two");
    c->tensor_parallel = static_cast<int>(n);
  } else if (flag == "--prefill") {
    c->prefill_endpoints.push_back(value);
  } else if (flag == "--decode") {
    c->decode_endpoints.push_back(value);
  } else if (flag == "--prefill-members-file") {
    c->prefill_members_file = value;
  } else if (flag == "--decode-members-file") {
    c->decode_members_file = value;
  } else if (flag == "--refresh-ms") {
    RETURN_IF_ERROR(need_u64(10, 600'000));
    c->refresh_ms = n;
  } else if (flag == "--api-key") {
    const char* colon = std::strchr(value, ':');
    if (colon == nullptr || colon == value || colon[1] == '\0') {
      return Status::InvalidArgument("--api-key: expected KEY:TENANT");
    }
    c->api_keys.push_back(tandem::agent::MakeApiKey(std::string_view(value, colon - value), colon + 1));
  } else if (flag == "--tls-cert") {
    c->tls_cert_file = value;
  } else if (flag == "--tls-key") {
    c->tls_key_file = value;
  } else if (flag == "--tls-ca") {
    c->tls_ca_file = value;
  } else if (flag == "--tls-server-name") {
    c->tls_server_name = value;
  } else if (flag == "--deployment") {
    c->deployment = value;
  } else if (flag == "--pool") {
    c->pool = value;
  } else if (flag == "--transfer-timeout-ms") {
    RETURN_IF_ERROR(need_u64(1, 3'600'000));
    c->transfer_timeout_ms = n;
  } else if (flag == "--shutdown-grace-ms") {
    RETURN_IF_ERROR(need_u64(0, 3'600'000));
    c->shutdown_grace_ms = n;
  } else {
    return Status::InvalidArgument("unknown flag " + flag);
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check_only = false;
  std::vector<std::pair<std::string, const char*>> flags;
  bool fault_injection = false, no_page_tags = false, no_prefix_cache = false, no_transfer_checksum = false;
  bool forward_unknown_tool_calls = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      return 0;
    } else if (arg == "--check-config") {
      check_only = true;
    } else if (arg == "--enable-fault-injection") {
      fault_injection = true;
    } else if (arg == "--no-page-tags") {
      no_page_tags = true;
    } else if (arg == "--no-prefix-cache") {
      no_prefix_cache = true;
    } else if (arg == "--no-transfer-checksum") {
      no_transfer_checksum = true;
    } else if (arg == "--forward-unknown-tool-calls") {
      forward_unknown_tool_calls = true;
    } else if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg.rfind("--", 0) == 0 && i + 1 < argc) {
      flags.emplace_back(arg, argv[++i]);
    } else {
      std::fprintf(stderr, "tandem-agent: unknown argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }
  AgentConfig config;
  if (!config_path.empty()) {
    StatusOr<AgentConfig> loaded = tandem::agent::LoadAgentConfig(config_path, /*validate=*/false);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tandem-agent: %s\n", loaded.status().ToString().c_str());
      return 1;
    }
    config = std::move(*loaded);
  }
  // What the controller's pods carry in the environment (docs/controller.md): the pools' headless
  // Services (NAME.NAMESPACE.svc; the members' gRPC port is ours) and the API keys Secret.
  if (const char* svc = std::getenv("TANDEM_PREFILL_SERVICE");
      svc && *svc && config.prefill_service.empty()) {
    config.prefill_service = std::string(svc) + ":" + std::to_string(config.grpc_port);
  }
  if (const char* svc = std::getenv("TANDEM_DECODE_SERVICE"); svc && *svc && config.decode_service.empty()) {
    config.decode_service = std::string(svc) + ":" + std::to_string(config.grpc_port);
  }
  if (const char* keys = std::getenv("TANDEM_API_KEYS"); keys && *keys) {
    StatusOr<std::vector<tandem::agent::ApiKey>> parsed = tandem::agent::ParseApiKeyText(keys);
    if (!parsed.ok()) {
      std::fprintf(stderr, "tandem-agent: TANDEM_API_KEYS: %s\n", parsed.status().ToString().c_str());
      return 1;
    }
    config.api_keys.insert(config.api_keys.end(), parsed->begin(), parsed->end());
  }
  if (!config.api_key_file.empty()) {
    std::ifstream in(config.api_key_file);
    std::stringstream text;
    text << in.rdbuf();
    StatusOr<std::vector<tandem::agent::ApiKey>> parsed =
        in ? tandem::agent::ParseApiKeyText(text.str())
           : StatusOr<std::vector<tandem::agent::ApiKey>>(tandem::Status::NotFound("cannot open"));
    if (!parsed.ok()) {
      std::fprintf(stderr, "tandem-agent: auth.apiKeyFile %s: %s\n", config.api_key_file.c_str(),
                   parsed.status().ToString().c_str());
      return 1;
    }
    config.api_keys.insert(config.api_keys.end(), parsed->begin(), parsed->end());
  }
  const bool pool_given = !config_path.empty();
  for (const auto& [flag, value] : flags) {
    if (Status st = ApplyFlag(flag, value, &config); !st.ok()) {
      std::fprintf(stderr, "tandem-agent: %s\n", st.ToString().c_str());
      return 2;
    }
  }
  bool pool_flag = false;
  for (const auto& f : flags) pool_flag = pool_flag || f.first == "--pool";
  if (!pool_given && !pool_flag) config.pool = std::string(tandem::agent::RoleName(config.role));
  config.fault_injection = fault_injection;
  if (no_page_tags) config.page_tags = false;
  if (no_prefix_cache) config.prefix_cache = false;
  if (no_transfer_checksum) config.transfer_checksum = false;
  if (forward_unknown_tool_calls) config.forward_unknown_tool_calls = true;
  if (Status st = tandem::agent::ValidateAgentConfig(config); !st.ok()) {
    std::fprintf(stderr, "tandem-agent: %s\n", st.ToString().c_str());
    return 1;
  }
  if (const std::string isa_error = tandem::engine::KernelIsaEnvironmentError(); !isa_error.empty()) {
    std::fprintf(stderr, "tandem-agent: %s\n", isa_error.c_str());
    return 1;
  }
  std::fprintf(
      stderr, "tandem-agent: role=%s deployment=%s pool=%s weights=%s kv_cache=%s page_tags=%s kernels=%s\n",
      std::string(tandem::agent::RoleName(config.role)).c_str(), config.deployment.c_str(),
      config.pool.c_str(), std::string(tandem::engine::WeightFormatName(config.weights)).c_str(),
      std::string(tandem::engine::KvCacheDtypeName(config.kv_cache)).c_str(), config.page_tags ? "on" : "off",
      tandem::engine::KernelIsaName(tandem::engine::ActiveKernelIsa()));
  if (check_only) return 0;

  // Signals go to this thread's sigwait, never to a serving thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  StatusOr<std::unique_ptr<tandem::agent::Agent>> agent = tandem::agent::Agent::Start(config);
  if (!agent.ok()) {
    std::fprintf(stderr, "tandem-agent: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "tandem-agent: serving: http=%u grpc=%u metrics=%u\n", (*agent)->http_port(),
               (*agent)->grpc_port(), (*agent)->metrics_port());
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "tandem-agent: %s: draining (grace %llu ms)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               static_cast<unsigned long long>(config.shutdown_grace_ms));
  (*agent)->Shutdown(static_cast<int64_t>(config.shutdown_grace_ms));
  std::fprintf(stderr, "tandem-agent: stopped\n");
  return 0;
}
