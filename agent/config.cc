#include "agent/config.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

namespace tandem::agent {
namespace {

// yaml-cpp throws; everything below runs inside ParseAgentConfig's try block and reports errors
// as Status values naming the key path.
Status CheckKeys(const YAML::Node& node, std::string_view where,
                 std::initializer_list<std::string_view> allowed) {
  if (!node.IsMap()) return Status::InvalidArgument(std::string(where) + ": must be a mapping");
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) {
      std::string path = where.empty() ? key : std::string(where) + "." + key;
      return Status::InvalidArgument(path + ": unknown key");
    }
  }
  return Status::Ok();
}

constexpr std::string_view kSha256Prefix = "sha256:";

// 64 hex digits (either case) as 32 bytes.
StatusOr<std::array<uint8_t, 32>> ParseSha256Hex(std::string_view hex) {
  std::array<uint8_t, 32> out{};
  if (hex.size() != 64) return Status::InvalidArgument("a SHA-256 digest is 64 hex digits");
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    int v = 0;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return Status::InvalidArgument("a SHA-256 digest is 64 hex digits");
    }
    out[i / 2] = static_cast<uint8_t>(out[i / 2] << 4 | v);
  }
  return out;
}

std::string Join(std::string_view where, std::string_view key) {
  return where.empty() ? std::string(key) : std::string(where) + "." + std::string(key);
}

Status ReadString(const YAML::Node& parent, std::string_view where, const char* key, std::string* out) {
  YAML::Node n = parent[key];
  if (!n) return Status::Ok();
  if (!n.IsScalar()) return Status::InvalidArgument(Join(where, key) + ": must be a string");
  *out = n.as<std::string>();
  return Status::Ok();
}

Status ReadBool(const YAML::Node& parent, std::string_view where, const char* key, bool* out) {
  YAML::Node n = parent[key];
  if (!n) return Status::Ok();
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
    return Status::InvalidArgument(Join(where, key) + ": must be true or false");
  }
  *out = v;
  return Status::Ok();
}

Status ReadUint(const YAML::Node& parent, std::string_view where, const char* key, uint64_t lo, uint64_t hi,
                uint64_t* out) {
  YAML::Node n = parent[key];
  if (!n) return Status::Ok();
  const std::string range = " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  if (!n.IsScalar()) return Status::InvalidArgument(Join(where, key) + ":" + range);
  const std::string& text = n.Scalar();
  uint64_t v = 0;
  if (text.empty() || text.size() > 20) return Status::InvalidArgument(Join(where, key) + ":" + range);
  for (char c : text) {
    if (c < '0' || c > '9') return Status::InvalidArgument(Join(where, key) + ":" + range);
    if (v > (std::numeric_limits<uint64_t>::max() - (c - '0')) / 10) {
      return Status::InvalidArgument(Join(where, key) + ":" + range);
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v < lo || v > hi) return Status::InvalidArgument(Join(where, key) + ":" + range);
  *out = v;
  return Status::Ok();
}

Status ReadPort(const YAML::Node& parent, std::string_view where, const char* key, uint16_t* out) {
  uint64_t v = *out;
  RETURN_IF_ERROR(ReadUint(parent, where, key, 1, 65535, &v));
  *out = static_cast<uint16_t>(v);
  return Status::Ok();
}

Status ParseListen(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "listen", {"host", "httpPort", "grpcPort", "metricsPort"}));
  RETURN_IF_ERROR(ReadString(n, "listen", "host", &c->listen_host));
  RETURN_IF_ERROR(ReadPort(n, "listen", "httpPort", &c->http_port));
  RETURN_IF_ERROR(ReadPort(n, "listen", "grpcPort", &c->grpc_port));
  return ReadPort(n, "listen", "metricsPort", &c->metrics_port);
}

Status ParseModel(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "model", {"path", "dummy", "weights", "name"}));
  RETURN_IF_ERROR(ReadString(n, "model", "path", &c->model_path));
  RETURN_IF_ERROR(ReadString(n, "model", "name", &c->served_model_name));
  if (YAML::Node d = n["dummy"]) {
    RETURN_IF_ERROR(CheckKeys(d, "model.dummy", {"preset", "seed"}));
    RETURN_IF_ERROR(ReadString(d, "model.dummy", "preset", &c->dummy_preset));
    RETURN_IF_ERROR(
        ReadUint(d, "model.dummy", "seed", 0, std::numeric_limits<uint64_t>::max(), &c->dummy_seed));
    if (c->dummy_preset.empty()) return Status::InvalidArgument("model.dummy.preset: required");
  }
  std::string weights(engine::WeightFormatName(c->weights));
  RETURN_IF_ERROR(ReadString(n, "model", "weights", &weights));
  StatusOr<engine::WeightFormat> format = engine::ParseWeightFormat(weights);
  if (!format.ok()) return format.status().WithContext("model.weights");
  c->weights = *format;
  return Status::Ok();
}

Status ParseKvCache(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "kvCache", {"dtype", "bytes"}));
  std::string dtype(engine::KvCacheDtypeName(c->kv_cache));
  RETURN_IF_ERROR(ReadString(n, "kvCache", "dtype", &dtype));
  StatusOr<engine::KvCacheDtype> d = engine::ParseKvCacheDtype(dtype);
  if (!d.ok()) return d.status().WithContext("kvCache.dtype");
  c->kv_cache = *d;
  return ReadUint(n, "kvCache", "bytes", 1, std::numeric_limits<uint64_t>::max(), &c->kv_cache_bytes);
}

Status ParseIntegrity(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "integrity", {"pageTags", "transferChecksum"}));
  RETURN_IF_ERROR(ReadBool(n, "integrity", "pageTags", &c->page_tags));
  return ReadBool(n, "integrity", "transferChecksum", &c->transfer_checksum);
}

Status ReadStringList(const YAML::Node& parent, std::string_view where, const char* key,
                      std::vector<std::string>* out) {
  YAML::Node n = parent[key];
  if (!n) return Status::Ok();
  if (!n.IsSequence()) return Status::InvalidArgument(Join(where, key) + ": must be a list of strings");
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar() || n[i].Scalar().empty()) {
      return Status::InvalidArgument(Join(where, key) + "[" + std::to_string(i) +
                                     "]: must be a non-empty string");
    }
    out->push_back(n[i].Scalar());
  }
  return Status::Ok();
}

Status ParseEngine(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "engine",
                            {"threads", "tensorParallel", "prefixCache", "transferTimeoutMs", "queueWaitMs",
                             "probePeriodMs", "probeTimeoutMs"}));
  uint64_t threads = static_cast<uint64_t>(c->threads);
  RETURN_IF_ERROR(ReadUint(n, "engine", "threads", 0, 256, &threads));
  c->threads = static_cast<int>(threads);
  uint64_t tp = static_cast<uint64_t>(c->tensor_parallel);
  RETURN_IF_ERROR(ReadUint(n, "engine", "tensorParallel", 1, 64, &tp));
  if ((tp & (tp - 1)) != 0) {
    return Status::InvalidArgument("engine.tensorParallel: " + std::to_string(tp) + " is not a power of two");
  }
  c->tensor_parallel = static_cast<int>(tp);
  RETURN_IF_ERROR(ReadBool(n, "engine", "prefixCache", &c->prefix_cache));
  RETURN_IF_ERROR(ReadUint(n, "engine", "transferTimeoutMs", 1, 3'600'000, &c->transfer_timeout_ms));
  RETURN_IF_ERROR(ReadUint(n, "engine", "queueWaitMs", 0, 3'600'000, &c->queue_wait_ms));
  RETURN_IF_ERROR(ReadUint(n, "engine", "probePeriodMs", 10, 3'600'000, &c->probe_period_ms));
  return ReadUint(n, "engine", "probeTimeoutMs", 10, 3'600'000, &c->probe_timeout_ms);
}

Status ParseApi(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(
      n, "api",
      {"defaultMaxTokens", "maxBodyBytes", "maxBufferedBodyBytes", "headerTimeoutMs", "maxInflight",
       "tenantMaxInflight", "maxQueuedPerTenant", "queueTimeoutMs", "tenantWeights", "unknownToolCalls"}));
  uint64_t max_tokens = static_cast<uint64_t>(c->default_max_tokens);
  RETURN_IF_ERROR(ReadUint(n, "api", "defaultMaxTokens", 1, 1u << 20, &max_tokens));
  c->default_max_tokens = static_cast<int32_t>(max_tokens);
  RETURN_IF_ERROR(ReadUint(n, "api", "maxBodyBytes", 1024, 1ull << 30, &c->max_body_bytes));
  RETURN_IF_ERROR(ReadUint(n, "api", "maxBufferedBodyBytes", 1024, 1ull << 40, &c->max_buffered_body_bytes));
  if (!n["maxBufferedBodyBytes"]) {
    c->max_buffered_body_bytes = std::max(c->max_buffered_body_bytes, c->max_body_bytes);
  } else if (c->max_buffered_body_bytes < c->max_body_bytes) {
    return Status::InvalidArgument("api.maxBufferedBodyBytes: " + std::to_string(c->max_buffered_body_bytes) +
                                   " is below api.maxBodyBytes (" + std::to_string(c->max_body_bytes) +
                                   "): no body of the largest allowed size could be read");
  }
  RETURN_IF_ERROR(ReadUint(n, "api", "headerTimeoutMs", 1, 600'000, &c->header_timeout_ms));
  RETURN_IF_ERROR(ReadUint(n, "api", "maxInflight", 1, 1u << 20, &c->max_inflight));
  RETURN_IF_ERROR(ReadUint(n, "api", "tenantMaxInflight", 0, 1u << 20, &c->tenant_max_inflight));
  RETURN_IF_ERROR(ReadUint(n, "api", "maxQueuedPerTenant", 0, 1u << 20, &c->max_queued_per_tenant));
  RETURN_IF_ERROR(ReadUint(n, "api", "queueTimeoutMs", 0, 600'000, &c->queue_timeout_ms));
  if (YAML::Node w = n["tenantWeights"]) {
    if (!w.IsMap()) return Status::InvalidArgument("api.tenantWeights: must be a mapping of tenant: weight");
    for (const auto& kv : w) {
      const std::string tenant = kv.first.as<std::string>();
      uint64_t weight = 1;
      YAML::Node holder;
      holder[tenant] = kv.second;
      RETURN_IF_ERROR(ReadUint(holder, "api.tenantWeights", tenant.c_str(), 1, 1000, &weight));
      c->tenant_weights[tenant] = static_cast<int64_t>(weight);
    }
  }
  std::string unknown_tools = c->forward_unknown_tool_calls ? "forward" : "drop";
  RETURN_IF_ERROR(ReadString(n, "api", "unknownToolCalls", &unknown_tools));
  if (unknown_tools != "drop" && unknown_tools != "forward") {
    return Status::InvalidArgument("api.unknownToolCalls: '" + unknown_tools + "' must be drop or forward");
  }
  c->forward_unknown_tool_calls = unknown_tools == "forward";
  return Status::Ok();
}

Status ParseAuth(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "auth", {"apiKeys", "apiKeyFile"}));
  RETURN_IF_ERROR(ReadString(n, "auth", "apiKeyFile", &c->api_key_file));
  YAML::Node keys = n["apiKeys"];
  if (!keys) return Status::Ok();
  if (!keys.IsSequence()) return Status::InvalidArgument("auth.apiKeys: must be a list of {key, tenant}");
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string where = "auth.apiKeys[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(CheckKeys(keys[i], where, {"key", "sha256", "tenant"}));
    std::string text, digest, tenant;
    RETURN_IF_ERROR(ReadString(keys[i], where, "key", &text));
    RETURN_IF_ERROR(ReadString(keys[i], where, "sha256", &digest));
    RETURN_IF_ERROR(ReadString(keys[i], where, "tenant", &tenant));
    if (text.empty() == digest.empty() || tenant.empty()) {
      return Status::InvalidArgument(where + ": one of key or sha256, and tenant, are required");
    }
    ApiKey key = MakeApiKey(text, std::move(tenant));
    if (!digest.empty()) {
      StatusOr<std::array<uint8_t, 32>> parsed = ParseSha256Hex(digest);
      if (!parsed.ok()) return parsed.status().WithContext(where + ".sha256");
      key.sha256 = *parsed;
    }
    c->api_keys.push_back(std::move(key));
  }
  return Status::Ok();
}

Status ParseTls(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "tls", {"certFile", "keyFile", "caFile", "serverName", "refreshSeconds"}));
  RETURN_IF_ERROR(ReadString(n, "tls", "certFile", &c->tls_cert_file));
  RETURN_IF_ERROR(ReadString(n, "tls", "keyFile", &c->tls_key_file));
  RETURN_IF_ERROR(ReadString(n, "tls", "caFile", &c->tls_ca_file));
  RETURN_IF_ERROR(ReadString(n, "tls", "serverName", &c->tls_server_name));
  return ReadUint(n, "tls", "refreshSeconds", 1, 86'400, &c->tls_refresh_s);
}

Status ParseRouter(const YAML::Node& n, AgentConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, "router",
                            {"prefill", "decode", "prefillService", "decodeService", "prefillMembersFile",
                             "decodeMembersFile", "refreshMs"}));
  RETURN_IF_ERROR(ReadStringList(n, "router", "prefill", &c->prefill_endpoints));
  RETURN_IF_ERROR(ReadStringList(n, "router", "decode", &c->decode_endpoints));
  RETURN_IF_ERROR(ReadString(n, "router", "prefillService", &c->prefill_service));
  RETURN_IF_ERROR(ReadString(n, "router", "decodeService", &c->decode_service));
  RETURN_IF_ERROR(ReadString(n, "router", "prefillMembersFile", &c->prefill_members_file));
  RETURN_IF_ERROR(ReadString(n, "router", "decodeMembersFile", &c->decode_members_file));
  return ReadUint(n, "router", "refreshMs", 10, 600'000, &c->refresh_ms);
}

Status ParseRoot(const YAML::Node& root, AgentConfig* c) {
  if (!root || root.IsNull()) return Status::Ok();  // an empty file: all defaults
  RETURN_IF_ERROR(CheckKeys(root, "",
                            {"role", "deployment", "pool", "listen", "model", "kvCache", "integrity",
                             "engine", "api", "auth", "tls", "router", "shutdownGraceMs"}));
  std::string role(RoleName(c->role));
  RETURN_IF_ERROR(ReadString(root, "", "role", &role));
  StatusOr<Role> r = ParseRole(role);
  if (!r.ok()) return r.status().WithContext("role");
  c->role = *r;
  c->pool = std::string(RoleName(c->role));
  RETURN_IF_ERROR(ReadString(root, "", "deployment", &c->deployment));
  RETURN_IF_ERROR(ReadString(root, "", "pool", &c->pool));
  if (YAML::Node n = root["listen"]) RETURN_IF_ERROR(ParseListen(n, c));
  if (YAML::Node n = root["model"]) RETURN_IF_ERROR(ParseModel(n, c));
  if (YAML::Node n = root["kvCache"]) RETURN_IF_ERROR(ParseKvCache(n, c));
  if (YAML::Node n = root["integrity"]) RETURN_IF_ERROR(ParseIntegrity(n, c));
  if (YAML::Node n = root["engine"]) RETURN_IF_ERROR(ParseEngine(n, c));
  if (YAML::Node n = root["api"]) RETURN_IF_ERROR(ParseApi(n, c));
  if (YAML::Node n = root["auth"]) RETURN_IF_ERROR(ParseAuth(n, c));
  if (YAML::Node n = root["tls"]) RETURN_IF_ERROR(ParseTls(n, c));
  if (YAML::Node n = root["router"]) RETURN_IF_ERROR(ParseRouter(n, c));
  return ReadUint(root, "", "shutdownGraceMs", 0, 3'600'000, &c->shutdown_grace_ms);
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRouter: return "router";
    case Role::kPrefill: return "prefill";
    case Role::kDecode: return "decode";
    case Role::kStandalone: return "standalone";
  }
  return "?";
}

StatusOr<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kRouter, Role::kPrefill, Role::kDecode, Role::kStandalone}) {
    if (name == RoleName(r)) return r;
  }
  return Status::InvalidArgument("unknown role '" + std::string(name) +
                                 "' (expected router, prefill, decode or standalone)");
}

Status ValidateAgentConfig(const AgentConfig& c) {
  // Port 0 (any free port) is only set from flags and tests; the file requires 1..65535.
  auto clash = [](uint16_t a, uint16_t b) { return a != 0 && a == b; };
  if (clash(c.http_port, c.grpc_port) || clash(c.http_port, c.metrics_port) ||
      clash(c.grpc_port, c.metrics_port)) {
    return Status::InvalidArgument("listen: httpPort, grpcPort and metricsPort must differ");
  }
  if (c.role != Role::kRouter && c.model_path.empty() == c.dummy_preset.empty()) {
    return Status::InvalidArgument("model: exactly one of model.path and model.dummy is required for role " +
                                   std::string(RoleName(c.role)));
  }
  if (c.deployment.empty() || c.pool.empty()) {
    return Status::InvalidArgument("deployment and pool must not be empty (they label every metric)");
  }
  const int tls_files = !c.tls_cert_file.empty() + !c.tls_key_file.empty() + !c.tls_ca_file.empty();
  if (tls_files != 0 && tls_files != 3) {
    return Status::InvalidArgument(
        "tls: certFile, keyFile and caFile go together (mutual TLS needs all three)");
  }
  if (tls_files == 0 && !c.tls_server_name.empty()) {
    return Status::InvalidArgument("tls.serverName: set without certFile, keyFile and caFile");
  }
  if (c.role == Role::kRouter) {
    if (c.prefill_endpoints.empty() && c.prefill_service.empty() && c.prefill_members_file.empty()) {
      return Status::InvalidArgument(
          "router.prefill: a router needs prefill members (a list, router.prefillService or "
          "router.prefillMembersFile)");
    }
    if (c.decode_endpoints.empty() && c.decode_service.empty() && c.decode_members_file.empty()) {
      return Status::InvalidArgument(
          "router.decode: a router needs decode members (a list, router.decodeService or "
          "router.decodeMembersFile)");
    }
  }
  return Status::Ok();
}

std::array<uint8_t, 32> HashApiKey(std::string_view key) {
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  if (EVP_Digest(key.data(), key.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    std::abort();  // OpenSSL without SHA-256: nothing can be authenticated
  }
  return digest;
}

ApiKey MakeApiKey(std::string_view key, std::string tenant) {
  ApiKey out;
  out.sha256 = HashApiKey(key);
  out.tenant = std::move(tenant);
  return out;
}

const ApiKey* FindApiKey(const std::vector<ApiKey>& keys, std::string_view presented) {
  const std::array<uint8_t, 32> digest = HashApiKey(presented);
  const ApiKey* found = nullptr;
  for (const ApiKey& k : keys) {
    // No early exit: every entry costs the same whether or not an earlier one matched.
    const bool same = CRYPTO_memcmp(k.sha256.data(), digest.data(), digest.size()) == 0;
    if (same && found == nullptr) found = &k;
  }
  return found;
}

StatusOr<std::vector<ApiKey>> ParseApiKeyText(std::string_view text) {
  std::vector<ApiKey> keys;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string key, tenant, extra;
    if (!(fields >> key) || key[0] == '#') continue;
    if (!(fields >> tenant)) tenant = "default";
    if (fields >> extra) {
      return Status::InvalidArgument("line " + std::to_string(number) + ": expected \"KEY TENANT\"");
    }
    ApiKey entry = MakeApiKey(key, std::move(tenant));
    if (key.starts_with(kSha256Prefix)) {
      StatusOr<std::array<uint8_t, 32>> digest =
          ParseSha256Hex(std::string_view(key).substr(kSha256Prefix.size()));
      if (!digest.ok()) return digest.status().WithContext("line " + std::to_string(number));
      entry.sha256 = *digest;
    }
    keys.push_back(std::move(entry));
  }
  return keys;
}

StatusOr<AgentConfig> ParseAgentConfig(std::string_view yaml_text, bool validate) {
  AgentConfig config;
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    RETURN_IF_ERROR(ParseRoot(root, &config));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("malformed YAML: ") + e.what());
  }
  if (validate) RETURN_IF_ERROR(ValidateAgentConfig(config));
  return config;
}

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path, bool validate) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<AgentConfig> config = ParseAgentConfig(text.str(), validate);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

}  // namespace tandem::agent
