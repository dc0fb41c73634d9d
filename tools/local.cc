// `tandem local`: the disaggregated stack on one machine. Starts a router, prefill and decode
// agents as separate tandem-agent processes on loopback (production's split by default: prefill
// FP8 weights + BF16 KV, decode INT4 weights + FP8 KV, page tags and the transfer checksum on),
// waits until every agent is ready, prints the URL and the API key, and on Ctrl-C / SIGTERM drains
// them all and exits 0. Checkpoints in another weight format than the model directory's are made
// once with `tandem quantize` beside it (DIR-fp8, DIR-int4). The default model is the small trained
// tool-calling model committed in models/tool-tiny (docs/eval.md).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/model/model_config.h"
#include "tools/commands.h"
#include "tools/local_pki.h"
#include "tools/local_support.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: tandem local [--model DIR (default models/tool-tiny)] [--prefill N] [--decode N]\n"
    "                    [--port N (default 8000)]\n"
    "                    [--prefill-weights bf16|fp8|int4 (fp8)] [--prefill-kv bf16|fp8_e4m3 (bf16)]\n"
    "                    [--decode-weights bf16|fp8|int4 (int4)] [--decode-kv bf16|fp8_e4m3 (fp8_e4m3)]\n"
    "                    [--api-key KEY] [--tenant-key KEY:TENANT (more keys, repeatable)]\n"
    "                    [--threads N (per agent)] [--kv-cache-bytes N]\n"
    "                    [--tensor-parallel N (ranks per agent, power of two)]\n"
    "                    [--transfer-timeout-ms N] [--ready-file PATH] [--agent PATH]\n"
    "                    [--no-prefix-cache] [--no-page-tags] [--no-transfer-checksum]\n"
    "                    [--enable-fault-injection (tests: honour x-tandem-fault)]\n"
    "                    [--forward-unknown-tool-calls (pass on calls to functions a request did not\n"
    "                     offer; by default the router drops them)]\n"
    "                    [--restart-agents (start a prefill or decode agent again when it exits)]\n"
    "                    [--tls (mutual TLS between the agents, from a throwaway private CA)]\n"
    "                    [--tls-dir DIR (mutual TLS from DIR/ca.crt, tls.crt, tls.key)]\n"
    "                    [--tls-server-name NAME (the DNS name in their certificate, tandem-agent)]\n";

struct LocalArgs {
  std::string model = "models/tool-tiny";
  bool model_given = false;
  int prefill = 1, decode = 1;
  int port = 8000;
  std::string prefill_weights = "fp8", prefill_kv = "bf16", decode_weights = "int4", decode_kv = "fp8_e4m3";
  std::string api_key;
  std::vector<std::string> tenant_keys;  // KEY:TENANT, beside api_key (tenant "local")
  int threads = 1;
  int tensor_parallel = 1;
  std::string kv_bytes = "268435456";
  std::string transfer_timeout_ms = "30000";
  std::string ready_file;
  std::string agent;
  bool fault_injection = false;
  bool no_prefix_cache = false;
  bool no_page_tags = false;
  bool no_transfer_checksum = false;
  bool restart_agents = false;
  bool forward_unknown_tool_calls = false;
  bool tls = false;     // --tls or --tls-dir
  std::string tls_dir;  // --tls-dir: certificates given; empty: made for this run
  std::string tls_server_name = "tandem-agent";
};

bool ParseArgs(const std::vector<std::string>& args, LocalArgs* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    bool* switch_flag = flag == "--enable-fault-injection"       ? &out->fault_injection
                        : flag == "--no-prefix-cache"            ? &out->no_prefix_cache
                        : flag == "--no-page-tags"               ? &out->no_page_tags
                        : flag == "--no-transfer-checksum"       ? &out->no_transfer_checksum
                        : flag == "--restart-agents"             ? &out->restart_agents
                        : flag == "--forward-unknown-tool-calls" ? &out->forward_unknown_tool_calls
                        : flag == "--tls"                        ? &out->tls
                                                                 : nullptr;
    if (switch_flag != nullptr) {
      *switch_flag = true;
      continue;
    }
    if (i + 1 >= args.size()) return false;
    const std::string& v = args[++i];
    auto number = [&](int lo, int hi, int* dst) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < lo || n > hi) return false;
      *dst = static_cast<int>(n);
      return true;
    };
    if (flag == "--model") {
      out->model = v;
      out->model_given = true;
    } else if (flag == "--prefill") {
      if (!number(1, 16, &out->prefill)) return false;
    } else if (flag == "--decode") {
      if (!number(1, 16, &out->decode)) return false;
    } else if (flag == "--port") {
      if (!number(0, 65535, &out->port)) return false;
    } else if (flag == "--threads") {
      if (!number(1, 256, &out->threads)) return false;
    } else if (flag == "--tensor-parallel") {
      if (!number(1, 64, &out->tensor_parallel)) return false;
    } else if (flag == "--prefill-weights") {
      out->prefill_weights = v;
    } else if (flag == "--prefill-kv") {
      out->prefill_kv = v;
    } else if (flag == "--decode-weights") {
      out->decode_weights = v;
    } else if (flag == "--decode-kv") {
      out->decode_kv = v;
    } else if (flag == "--api-key") {
      out->api_key = v;
    } else if (flag == "--tenant-key") {
      const size_t colon = v.find(':');
      if (colon == 0 || colon == std::string::npos || colon + 1 == v.size()) return false;
      out->tenant_keys.push_back(v);
    } else if (flag == "--kv-cache-bytes") {
      out->kv_bytes = v;
    } else if (flag == "--transfer-timeout-ms") {
      out->transfer_timeout_ms = v;
    } else if (flag == "--ready-file") {
      out->ready_file = v;
    } else if (flag == "--agent") {
      out->agent = v;
    } else if (flag == "--tls-dir") {
      out->tls_dir = v;
      out->tls = true;
    } else if (flag == "--tls-server-name") {
      out->tls_server_name = v;
    } else {
      return false;
    }
  }
  return true;
}

std::string RandomKey() {
  std::random_device rd;
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return std::string("tk-") + hex;
}

}  // namespace

int RunLocal(const std::vector<std::string>& raw) {
  LocalArgs args;
  if (!ParseArgs(raw, &args)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  for (const std::string* w : {&args.prefill_weights, &args.decode_weights}) {
    if (!engine::ParseWeightFormat(*w).ok()) {
      std::fprintf(stderr, "tandem local: unknown weight format '%s'\n", w->c_str());
      return 2;
    }
  }
  // Mutual TLS on every gRPC hop (router -> prefill -> decode): one certificate for all the
  // agents, as one cert-manager Certificate serves a deployment's pods. A CA made here lives in a
  // private temporary directory removed on exit.
  std::string made_pki_dir;
  struct RemoveDir {
    const std::string& dir;
    ~RemoveDir() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } remove_pki{made_pki_dir};
  LocalPki pki;
  if (args.tls) {
    StatusOr<LocalPki> got = Status::Ok();
    if (!args.tls_dir.empty()) {
      got = LocalPkiIn(args.tls_dir);
    } else {
      std::string tmpl = (fs::temp_directory_path() / "tandem-local-tls-XXXXXX").string();
      if (mkdtemp(tmpl.data()) == nullptr) {
        got = Status::Unavailable("tls: cannot make a temporary directory under " +
                                  fs::temp_directory_path().string());
      } else {
        made_pki_dir = tmpl;
        got = MakeLocalPki(made_pki_dir, args.tls_server_name);
      }
    }
    if (!got.ok()) {
      std::fprintf(stderr, "tandem local: %s\n", got.status().ToString().c_str());
      return 1;
    }
    pki = *got;
  }
  if (!args.model_given && !fs::exists(args.model + "/config.json")) {
    std::fprintf(stderr,
                 "tandem local: the default model %s is not here: run from the repository root, or give "
                 "--model DIR (`tandem make-model --out DIR` makes a random one)\n",
                 args.model.c_str());
    return 1;
  }
  StatusOr<std::string> prefill_dir = CheckpointIn(args.model, args.prefill_weights);
  StatusOr<std::string> decode_dir =
      prefill_dir.ok() ? CheckpointIn(args.model, args.decode_weights) : prefill_dir;
  if (!decode_dir.ok()) {
    std::fprintf(stderr, "tandem local: %s\n", decode_dir.status().ToString().c_str());
    return 1;
  }
  StatusOr<std::string> agent = args.agent.empty() ? FindAgentBinary() : StatusOr<std::string>(args.agent);
  if (!agent.ok()) {
    std::fprintf(stderr, "tandem local: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const std::string key = args.api_key.empty() ? RandomKey() : args.api_key;
  const std::string name = fs::path(args.model).filename().string();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Stack stack;
  auto common = [&](std::vector<std::string> a) {
    for (const std::string& s :
         {std::string("--host"), std::string("127.0.0.1"), std::string("--deployment"), std::string("local"),
          std::string("--name"), name, std::string("--transfer-timeout-ms"), args.transfer_timeout_ms,
          std::string("--shutdown-grace-ms"), std::string("10000")}) {
      a.push_back(s);
    }
    if (args.fault_injection) a.push_back("--enable-fault-injection");
    if (args.no_prefix_cache) a.push_back("--no-prefix-cache");
    if (args.no_page_tags) a.push_back("--no-page-tags");
    if (args.no_transfer_checksum) a.push_back("--no-transfer-checksum");
    if (args.tls) {
      a.insert(a.end(), {"--tls-cert", pki.cert_file, "--tls-key", pki.key_file, "--tls-ca", pki.ca_file,
                         "--tls-server-name", args.tls_server_name});
    }
    return a;
  };
  // Every agent's ports, held here until the agents listen on them.
  PortReservations ports;
  std::vector<std::string> prefill_endpoints, decode_endpoints;
  // {"prefill-0": "127.0.0.1:N", ...}: each pool member's gRPC endpoint, for the ready file
  nlohmann::ordered_json grpc_endpoints = nlohmann::ordered_json::object();
  auto start_pool = [&](const char* role, int n, const std::string& dir, const std::string& weights,
                        const std::string& kv, std::vector<std::string>* endpoints) -> Status {
    for (int i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(uint16_t grpc, ports.Reserve());
      ASSIGN_OR_RETURN(uint16_t metrics, ports.Reserve());
      ASSIGN_OR_RETURN(uint16_t http, ports.Reserve());
      const std::string label = std::string(role) + "-" + std::to_string(i);
      RETURN_IF_ERROR(stack.Spawn(label, *agent,
                                  common({"--role",
                                          role,
                                          "--model",
                                          dir,
                                          "--weights",
                                          weights,
                                          "--kv-cache",
                                          kv,
                                          "--kv-cache-bytes",
                                          args.kv_bytes,
                                          "--threads",
                                          std::to_string(args.threads),
                                          "--tensor-parallel",
                                          std::to_string(args.tensor_parallel),
                                          "--grpc-port",
                                          std::to_string(grpc),
                                          "--http-port",
                                          std::to_string(http),
                                          "--metrics-port",
                                          std::to_string(metrics)}),
                                  metrics));
      endpoints->push_back("127.0.0.1:" + std::to_string(grpc));
      grpc_endpoints[label] = endpoints->back();
    }
    return Status::Ok();
  };
  Status started = start_pool("prefill", args.prefill, *prefill_dir, args.prefill_weights, args.prefill_kv,
                              &prefill_endpoints);
  if (started.ok()) {
    started = start_pool("decode", args.decode, *decode_dir, args.decode_weights, args.decode_kv,
                         &decode_endpoints);
  }
  uint16_t router_port = static_cast<uint16_t>(args.port);
  if (started.ok() && router_port == 0) {
    StatusOr<uint16_t> p = ports.Reserve();
    started = p.status();
    if (p.ok()) router_port = *p;
  }
  if (started.ok()) {
    StatusOr<uint16_t> metrics = ports.Reserve();
    StatusOr<uint16_t> grpc = metrics.ok() ? ports.Reserve() : metrics;
    started = grpc.status();
    if (grpc.ok()) {
      std::vector<std::string> a =
          common({"--role", "router", "--model", args.model, "--http-port", std::to_string(router_port),
                  "--metrics-port", std::to_string(*metrics), "--grpc-port", std::to_string(*grpc),
                  "--api-key", key + ":local"});
      for (const std::string& k : args.tenant_keys) a.insert(a.end(), {"--api-key", k});
      if (args.forward_unknown_tool_calls) a.push_back("--forward-unknown-tool-calls");
      for (const std::string& e : prefill_endpoints) a.insert(a.end(), {"--prefill", e});
      for (const std::string& e : decode_endpoints) a.insert(a.end(), {"--decode", e});
      started = stack.Spawn("router", *agent, a, *metrics);
    }
  }
  if (started.ok()) started = stack.WaitReady(std::chrono::seconds(120), signals);
  ports.ReleaseAll();  // every agent listens on its ports now (or the start failed)
  if (!started.ok()) {
    std::fprintf(stderr, "tandem local: %s\n", started.ToString().c_str());
    stack.StopAll(std::chrono::seconds(5));
    return 1;
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(router_port) + "/v1";
  std::printf("tandem local: ready: %d prefill (%s weights, %s KV) + %d decode (%s weights, %s KV) agents\n",
              args.prefill, args.prefill_weights.c_str(), args.prefill_kv.c_str(), args.decode,
              args.decode_weights.c_str(), args.decode_kv.c_str());
  std::printf("  OPENAI_BASE_URL=%s\n  OPENAI_API_KEY=%s\n  model: %s\n", url.c_str(), key.c_str(),
              name.c_str());
  if (args.tls) {
    std::printf("  agent gRPC: mutual TLS, name %s, CA %s%s\n", args.tls_server_name.c_str(),
                pki.ca_file.c_str(), made_pki_dir.empty() ? "" : " (made for this run)");
  }
  std::printf("  metrics:%s\n  Ctrl-C stops the stack.\n", stack.MetricsUrls().c_str());
  std::fflush(stdout);
  // The ready file names every agent's pid and restart count; a restarted agent's new pid
  // replaces its old one (atomically: a reader sees the old file or the new).
  auto write_ready = [&] {
    if (args.ready_file.empty()) return;
    nlohmann::ordered_json doc = {{"base_url", url}, {"api_key", key}, {"model", name}};
    stack.DescribeChildren(&doc);
    doc["grpc"] = grpc_endpoints;
    doc["tls"] = nullptr;
    if (args.tls) {
      doc["tls"] = {{"ca", pki.ca_file},
                    {"cert", pki.cert_file},
                    {"key", pki.key_file},
                    {"server_name", args.tls_server_name}};
    }
    std::ofstream ready(args.ready_file + ".tmp");
    // Paths and names are bytes: any that are not UTF-8 become U+FFFD rather than an exception.
    ready << doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    ready.close();
    fs::rename(args.ready_file + ".tmp", args.ready_file);
  };
  write_ready();
  const int rc =
      stack.WaitForSignalOrExit(signals, args.restart_agents, [&](const std::string&) { write_ready(); });
  std::fprintf(stderr, "tandem local: stopping\n");
  const bool clean = stack.StopAll(std::chrono::seconds(15));
  return rc != 0 ? rc : (clean ? 0 : 1);
}

}  // namespace tandem::tools
