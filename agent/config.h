#pragma once
// tandem-agent's configuration: a YAML file (or the ConfigMap the controller renders) parsed into
// a plain struct. Unknown keys are errors, so a typo never silently falls back to a default.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::agent {

enum class Role { kRouter, kPrefill, kDecode, kStandalone };

std::string_view RoleName(Role role);
StatusOr<Role> ParseRole(std::string_view name);

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
};

// Parses YAML text. Every error names the offending key: `grpcPort: must be in 1..65535`.
StatusOr<AgentConfig> ParseAgentConfig(std::string_view yaml_text);

// Reads and parses a file; errors are prefixed with the path.
StatusOr<AgentConfig> LoadAgentConfig(const std::string& path);

// Cross-field checks (also run by the parsers).
Status ValidateAgentConfig(const AgentConfig& config);

}  // namespace tandem::agent
