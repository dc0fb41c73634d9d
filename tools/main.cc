// `tandem`: the command line (subcommands `version`, `demo`, `quantize`, `local`, `make-model`, `generate`,
// `bench`, `eval`).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/core/cpu_features.h"
#include "tools/commands.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);
};

constexpr Subcommand kSubcommands[] = {
    {"version", "build, CPU features and accelerators of this binary", tandem::tools::RunVersion},
    {"demo", "the engine's smallest end-to-end run: a KV page through BF16 and FP8", tandem::tools::RunDemo},
    {"quantize", "re-quantize a checkpoint directory: routed experts to int4, or Linears to fp8",
     tandem::tools::RunQuantize},
    {"make-model", "a deterministic random tiny model with a trained BPE vocabulary (Kimi K2 layout)",
     tandem::tools::RunMakeModel},
    {"generate", "one prompt through the serving engine on a model directory, streamed to stdout",
     tandem::tools::RunGenerate},
    {"local", "the disaggregated stack on loopback: router + prefill + decode agents (OpenAI API)",
     tandem::tools::RunLocal},
    {"bench", "production's KV, weights, integrity and serving tables measured on this machine",
     tandem::tools::RunBench},
    {"eval", "tool-call validity and accuracy of a model over the OpenAI API, per precision configuration",
     tandem::tools::RunEval},
};

void Usage(FILE* out) {
  std::fprintf(out, "usage: tandem <command> [args]\n\ncommands:\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-10s %s\n", s.name, s.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  // A kernel ceiling that names no variant would otherwise be ignored without a word.
  if (const std::string isa_error = tandem::engine::KernelIsaEnvironmentError(); !isa_error.empty()) {
    std::fprintf(stderr, "tandem: %s\n", isa_error.c_str());
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Subcommand& s : kSubcommands) {
    if (std::strcmp(argv[1], s.name) == 0) return s.run(args);
  }
  std::fprintf(stderr, "tandem: unknown command '%s'\n\n", argv[1]);
  Usage(stderr);
  return 2;
}
