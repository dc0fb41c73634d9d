#pragma once
// tandem-agent's configuration: a YAML file (or the ConfigMap the controller renders) parsed into
// a plain struct. Unknown keys are errors, so a typo never silently falls back to a default.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::agent {

enum class Role { kRouter, kPrefill, kDecode, kStandalone };

std::string_view RoleName(Role role);
StatusOr<Role> ParseRole(std::string_view name);

// An API key and the tenant it authenticates (the tenant salts prefix-cache sharing). Only the
// key's SHA-256 is kept: a memory dump or a config echo never shows a usable key.
struct ApiKey {
  std::array<uint8_t, 32> sha256{};
  std::string tenant;
};

// The SHA-256 of a key as presented (Authorization: Bearer KEY).
std::array<uint8_t, 32> HashApiKey(std::string_view key);
// The key as the agent keeps it: its digest, with its tenant.
ApiKey MakeApiKey(std::string_view key, std::string tenant);
// The entry whose digest matches `presented`'s, or nullptr. Every entry is compared, each in
// constant time (CRYPTO_memcmp), so the time taken tells nothing about which bytes matched.
const ApiKey* FindApiKey(const std::vector<ApiKey>& keys, std::string_view presented);

struct AgentConfig {
  Role role = Role::kStandalone;
  // Metric labels (ARCHITECTURE.md: deployment, pool, role): bounded, set by the controller.
  std::string deployment = "local";
  std::string pool = "standalone";

  std::string listen_host = "0.0.0.0";
  uint16_t http_port = 8000;     // OpenAI API (router, standalone)
  uint16_t grpc_port = 50051;    // agent-to-agent
  uint16_t metrics_port = 9400;  // /metrics, /healthz, /readyz

  // Model: a checkpoint directory, or a dummy preset with a seed.
  std::string model_path;
  std::string dummy_preset;
  uint64_t dummy_seed = 0;

  engine::WeightFormat weights = engine::WeightFormat::kBf16;
  engine::KvCacheDtype kv_cache = engine::KvCacheDtype::kBf16;
  uint64_t kv_cache_bytes = 1ull << 30;

  bool page_tags = true;
  bool transfer_checksum = true;

  // model.name: the id /v1/models lists and requests name (default: the path's last component,
  // or "dummy-<preset>").
  std::string served_model_name;

  // engine: forward-pass threads (0: all cores, at most 16), prefix cache (tenant-salted), how long
  // a KV transfer may take before it is aborted, how long a decode agent waits for free pages.
  int threads = 0;
  // engine.tensorParallel: ranks the model is sharded over (heads TP, routed experts EP; engine
  // ServingConfig::tensor_parallel): a power of two, 1..64. On CPU the ranks are threads sharing the
  // engine's threads; the CUDA backend will put one on each GPU.
  int tensor_parallel = 1;
  bool prefix_cache = true;
  uint64_t transfer_timeout_ms = 30'000;
  uint64_t queue_wait_ms = 10'000;
  // Readiness: a synthetic request through the engine every probe_period_ms; one that has not come
  // back after probe_timeout_ms makes /readyz fail (a wedged engine).
  uint64_t probe_period_ms = 10'000;
  uint64_t probe_timeout_ms = 30'000;

  // api: the OpenAI front (router, standalone).
  int32_t default_max_tokens = 256;
  uint64_t max_body_bytes = 8u << 20;
  // Request bodies held at once, all connections together (beyond: 429 with Retry-After); with
  // the engine's fixed KV pool this is what keeps the agent within a memory limit under a flood.
  uint64_t max_buffered_body_bytes = 256u << 20;
  uint64_t header_timeout_ms = 10'000;
  uint64_t max_inflight = 256;  // requests at once, all tenants; more wait in their tenant's queue
  // Fairness between tenants (admission.h): the slots one tenant may hold (0: all), how many of its
  // requests may wait for a slot and for how long (beyond either: 429 with Retry-After), and
  // weights (a freed slot goes to the waiting tenant with the fewest slots per unit of weight).
  uint64_t tenant_max_inflight = 0;
  uint64_t max_queued_per_tenant = 64;
  uint64_t queue_timeout_ms = 10'000;
  std::map<std::string, int64_t> tenant_weights;
  // api.unknownToolCalls: "drop" (default) takes a parsed tool call naming a function the request
  // did not offer out of the response (tandem_tool_calls_dropped_total counts it); "forward" passes
  // it on as the model wrote it (to measure the model's own tool-call validity).
  bool forward_unknown_tool_calls = false;

  // auth: API keys (inline {key|sha256, tenant}, or a file of "KEY TENANT" lines), kept as
  // SHA-256 digests. None: no authentication, and every request belongs to the tenant "default".
  std::vector<ApiKey> api_keys;
  std::string api_key_file;

  // tls: mutual TLS on the gRPC port and on every agent-to-agent call (router -> prefill and
  // decode, prefill -> decode). PEM files: this agent's certificate chain and key, and the CA
  // bundle its peers' certificates must chain to; all three re-read every tls_refresh_s, so a
  // rotated Secret takes effect without a restart. Set, the gRPC port refuses plaintext and any
  // peer without a certificate from that CA, and calls refuse servers likewise. tls_server_name:
  // the name (a DNS SAN) every agent's certificate carries and callers check, whatever address
  // they dialed ("": the dialed host). None set: plaintext (a single host, or a trusted network).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  std::string tls_server_name;
  uint64_t tls_refresh_s = 60;

  // router: pool members as host:port (static lists), a headless Service's DNS name with the
  // gRPC port (re-resolved every refresh_ms), or a file of host:port lines (re-read every
  // refresh_ms: what a deployment without DNS discovery, or a test, scales a pool by). The
  // members are the union of the three.
  std::vector<std::string> prefill_endpoints;
  std::vector<std::string> decode_endpoints;
  std::string prefill_service;
  std::string decode_service;
  std::string prefill_members_file;
  std::string decode_members_file;
  uint64_t refresh_ms = 500;

  // Drain (SIGTERM, or GET /drain on the metrics port: the pod's preStop hook): stop admitting,
  // turn not-ready, let in-flight requests finish for this long from the drain's start, then fail
  // the rest (the router retries those that had produced no token on another member).
  uint64_t shutdown_grace_ms = 30'000;

  // Test-only fault injection (PrefillRequest.fault); set only by --enable-fault-injection.
  bool fault_injection = false;
};

// API keys as text (auth.apiKeyFile, the TANDEM_API_KEYS environment variable): lines
// "KEY TENANT", or a bare "KEY" (tenant "default"); KEY may be "sha256:<64 hex digits>", the
// digest of the key instead of the key (what a key file at rest should hold: `printf %s KEY |
// sha256sum`); blank lines and '#' comments skipped.
StatusOr<std::vector<ApiKey>> ParseApiKeyText(std::string_view text);

// Parses YAML text. Every error names the offending key: `grpcPort: must be in 1..65535`.
// With validate = false the cross-field checks are left to the caller (tandem-agent applies its
// command-line flags first, then calls ValidateAgentConfig).
StatusOr<AgentConfig> ParseAgentConfig(std::string_view yaml_text, bool validate = true);

// Reads and parses a file; errors are prefixed with the path.
StatusOr<AgentConfig> LoadAgentConfig(const std::string& path, bool validate = true);

// Cross-field checks (also run by the parsers).
Status ValidateAgentConfig(const AgentConfig& config);

}  // namespace tandem::agent
