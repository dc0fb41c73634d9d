#pragma once
// Test fixture: runs tests/kube-sim/kube_sim.py (the simulated API server) on a free port for the
// lifetime of one object, with a kubeconfig pointing at it. Test-only (tandem_kube_testing).
//
//   TANDEM_START_KUBE_SIM_OR_SKIP(sim, {});              // GTEST_SKIP when Python/sim missing
//   auto client = kube::Client::New(sim->config()).value();

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "controller/kube/config.h"

namespace tandem::controller::kube::testing {

struct KubeSimOptions {
  bool tls = false;          // serve HTTPS with a CA and server certificate made by `openssl`
  bool client_cert = false;  // with tls: require a client certificate (one is made and used)
  std::string token;         // require this bearer token (written to the kubeconfig)
  std::string faults_json;   // --faults
  bool auto_ready = false;   // --auto-ready: pods/workloads become ready by themselves
  std::vector<std::string> extra_args;
};

class KubeSimProcess {
 public:
  // Starts the simulator and waits (up to 20 s) for its port file. Unavailable when the Python
  // interpreter, the script or (with tls) the openssl CLI is missing: callers skip the test.
  // Other errors (the process died, never wrote its port) are Internal with its stderr tail.
  static StatusOr<std::unique_ptr<KubeSimProcess>> Start(const KubeSimOptions& options = {});
  // Kills the process (SIGTERM, then SIGKILL) and removes its temporary directory.
  ~KubeSimProcess();
  KubeSimProcess(const KubeSimProcess&) = delete;
  KubeSimProcess& operator=(const KubeSimProcess&) = delete;

  int port() const { return port_; }
  const std::string& server() const { return server_; }                    // "http(s)://127.0.0.1:<port>"
  const std::string& kubeconfig_path() const { return kubeconfig_path_; }  // for kubectl too
  const std::string& dir() const { return dir_; }  // scratch directory, removed at the end
  // The config loaded from kubeconfig_path().
  const KubeConfig& config() const { return config_; }
  // The simulator's stderr so far (for failure messages).
  std::string Log() const;
  // Sends SIGKILL and waits (fault tests: the API server disappears).
  void Kill();

 private:
  KubeSimProcess() = default;

  int pid_ = -1;
  int port_ = 0;
  std::string server_;
  std::string dir_;
  std::string kubeconfig_path_;
  KubeConfig config_;
};

}  // namespace tandem::controller::kube::testing

// Declares `std::unique_ptr<KubeSimProcess> var` started with `options`, or skips the test when
// the simulator cannot run here; fails the test on any other start error.
#define TANDEM_START_KUBE_SIM_OR_SKIP(var, ...)                                            \
  auto var##_or = ::tandem::controller::kube::testing::KubeSimProcess::Start(__VA_ARGS__); \
  if (!var##_or.ok() && var##_or.status().code() == ::tandem::StatusCode::kUnavailable) {  \
    GTEST_SKIP() << "kube-sim unavailable: " << var##_or.status().ToString();              \
  }                                                                                        \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status().ToString();                              \
  std::unique_ptr<::tandem::controller::kube::testing::KubeSimProcess> var = std::move(var##_or).value()
