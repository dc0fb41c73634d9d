// libFuzzer target for tandem-agent's configuration: the YAML file (or the ConfigMap the
// controller renders) and the API-key text of auth.apiKeyFile / TANDEM_API_KEYS. Built with clang
// by scripts/fuzz.sh, not by CMake.
//
// Input: byte 0 bit 0 clear: the rest is a YAML config; set: the rest is API-key text.
// Invariants beyond "no crash, no sanitizer report, no exception escaping the parser":
// - every refusal is InvalidArgument with a message;
// - a config that parses passes ValidateAgentConfig, and parsing without the cross-field checks
//   then checking gives the same verdict as parsing with them;
// - parsed settings are within the documented ranges (ports, threads, tensorParallel a power of
//   two, timeouts, limits);
// - an API-key text that parses gives one entry per key line, each with a one-word tenant, and
//   a plain key line's key authenticates as its tenant (FindApiKey over the digests).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/config.h"

namespace {

using tandem::StatusCode;
using tandem::agent::AgentConfig;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckRefusal(const tandem::Status& status) {
  Check(status.code() == StatusCode::kInvalidArgument && !status.message().empty());
}

void CheckConfig(const AgentConfig& c) {
  Check(c.http_port >= 1 && c.grpc_port >= 1 && c.metrics_port >= 1);
  Check(c.threads >= 0 && c.threads <= 256);
  Check(c.tensor_parallel >= 1 && c.tensor_parallel <= 64 &&
        (c.tensor_parallel & (c.tensor_parallel - 1)) == 0);
  Check(c.kv_cache_bytes >= 1 && c.max_inflight >= 1 && c.max_body_bytes >= 1024);
  Check(c.default_max_tokens >= 1 && c.transfer_timeout_ms >= 1);
  for (const tandem::agent::ApiKey& key : c.api_keys) Check(!key.tenant.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    tandem::StatusOr<AgentConfig> checked = tandem::agent::ParseAgentConfig(text, /*validate=*/true);
    tandem::StatusOr<AgentConfig> unchecked = tandem::agent::ParseAgentConfig(text, /*validate=*/false);
    if (!unchecked.ok()) {
      CheckRefusal(unchecked.status());
      Check(!checked.ok());
      return 0;
    }
    const tandem::Status cross = tandem::agent::ValidateAgentConfig(*unchecked);
    Check(cross.ok() == checked.ok());
    if (!checked.ok()) {
      CheckRefusal(checked.status());
      return 0;
    }
    CheckConfig(*checked);
    return 0;
  }
  tandem::StatusOr<std::vector<tandem::agent::ApiKey>> keys = tandem::agent::ParseApiKeyText(text);
  if (!keys.ok()) {
    CheckRefusal(keys.status());
    return 0;
  }
  for (const tandem::agent::ApiKey& key : *keys) {
    Check(!key.tenant.empty());
    for (char c : key.tenant) Check(c != ' ' && c != '\n' && c != '\t');
  }
  // The first line, when it is a plain "KEY TENANT", authenticates KEY (the first entry with its
  // digest wins, so a later duplicate cannot take the key over).
  const std::string_view first = text.substr(0, text.find('\n'));
  const size_t space = first.find(' ');
  if (!keys->empty() && space != std::string_view::npos && space > 0 &&
      first.find_first_of("\t\r\v\f#") == std::string_view::npos &&
      first.find(' ', space + 1) == std::string_view::npos && space + 1 < first.size() &&
      !first.starts_with("sha256:")) {
    const tandem::agent::ApiKey* found = tandem::agent::FindApiKey(*keys, first.substr(0, space));
    Check(found == &(*keys)[0] && found->tenant == first.substr(space + 1));
  }
  return 0;
}
