// tandem-agent: the per-node process (roles router, prefill, decode, standalone).
// Today it loads and validates its configuration; serving lands with roadmap step 6.
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/config.h"

namespace {

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: tandem-agent --config FILE [--check-config]\n"
               "  --config FILE     agent configuration (YAML; see docs/agent-config.md)\n"
               "  --check-config    validate the configuration, print it, and exit\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config_path = argv[++i];
    } else if (std::strcmp(argv[i], "--check-config") == 0) {
      check_only = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      Usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "tandem-agent: unknown argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }
  if (config_path.empty()) {
    Usage(stderr);
    return 2;
  }
  tandem::StatusOr<tandem::agent::AgentConfig> config = tandem::agent::LoadAgentConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "tandem-agent: %s\n", config.status().ToString().c_str());
    return 1;
  }
  std::printf("role=%s deployment=%s pool=%s weights=%s kv_cache=%s page_tags=%s\n",
              std::string(tandem::agent::RoleName(config->role)).c_str(), config->deployment.c_str(),
              config->pool.c_str(), std::string(tandem::engine::WeightFormatName(config->weights)).c_str(),
              std::string(tandem::engine::KvCacheDtypeName(config->kv_cache)).c_str(),
              config->page_tags ? "on" : "off");
  if (check_only) return 0;
  std::fprintf(stderr, "tandem-agent: serving is not implemented yet (roadmap step 6)\n");
  return 3;
}
