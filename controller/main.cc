// tandem-controller: reconciles ModelDeployments into prefill/decode pools.
// Today it parses and validates its flags; the reconcilers land with roadmap step 7.
#include <cstdio>
#include <string>
#include <vector>

#include "controller/options.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: tandem-controller [--kubeconfig FILE] [--namespace NS] [--metrics-bind-address :8080]\n"
          "         [--health-probe-bind-address :8081] [--leader-elect=true|false]\n"
          "         [--leader-election-namespace NS] [--leader-election-id ID]\n"
          "         [--lease-duration 15] [--renew-deadline 10] [--retry-period 2]\n");
      return 0;
    }
  }
  tandem::StatusOr<tandem::controller::ControllerOptions> options =
      tandem::controller::ParseControllerFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "tandem-controller: %s\n", options.status().ToString().c_str());
    return 2;
  }
  std::fprintf(stderr, "tandem-controller: reconcilers are not implemented yet (roadmap step 7)\n");
  return 3;
}
