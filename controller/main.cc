// tandem-controller: reconciles ModelDeployments into prefill/decode pools.
//
// Startup: flags -> kubeconfig (or in-cluster) -> three clients, told apart by User-Agent (the
// reconcilers', fenced by leader election and rate-limited by --qps/--burst; the informers'; the
// Lease's) -> informers for every kind it reads -> /metrics,
// /healthz, /readyz -> leader election; the reconcile workers run only while this process leads.
// SIGTERM/SIGINT: stop leading (fence writes, release the Lease), stop workers and informers,
// exit 0. Losing the Lease otherwise exits 1 so the pod restarts as a clean candidate.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include "common/logging.h"
#include "controller/kube/client.h"
#include "controller/kube/config.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/metrics/server.h"
#include "controller/options.h"
#include "controller/reconcile/manager.h"
#include "controller/runtime/leader_election.h"

namespace {

using tandem::Status;
using tandem::StatusOr;
namespace controller = tandem::controller;

void Usage() {
  std::printf(
      "usage: tandem-controller [--kubeconfig FILE] [--namespace NS] [--metrics-bind-address :8080]\n"
      "         [--health-probe-bind-address :8081] [--leader-elect=true|false]\n"
      "         [--leader-election-namespace NS] [--leader-election-id ID] [--leader-election-identity ID]\n"
      "         [--lease-duration 15] [--renew-deadline 10] [--retry-period 2]\n"
      "         [--workers 2] [--qps 20] [--burst 30] [--resync-period 36000] [--agent-image IMAGE]\n"
      "         [--autoscale-interval 15] [--scrape-timeout-ms 1000]\n"
      "         [--prometheus-url URL] [--prometheus-selector TEMPLATE]\n"
      "         [--prometheus-latency-selector TEMPLATE] [--prometheus-rate-window 2m]\n"
      "\n"
      "The built-in autoscaler reads its signals from each pool member's /metrics, or, with\n"
      "--prometheus-url, from that Prometheus server's query API. The selector templates are the label\n"
      "matchers of a pool's series, with {namespace}, {deployment} and {pool} replaced; defaults:\n"
      "  --prometheus-selector          "
      "'namespace=\"{namespace}\",deployment=\"{deployment}\",pool=\"{pool}\"'\n"
      "  --prometheus-latency-selector  "
      "'namespace=\"{namespace}\",deployment=\"{deployment}\",pool=\"router\"'\n"
      "(docs/autoscaling.md, \"Prometheus as the signal source\").\n");
}

std::string DefaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  return std::string(host) + "_" + std::to_string(getpid());
}

// Starts the /metrics and health servers (one when the two addresses are equal).
StatusOr<std::vector<std::unique_ptr<controller::metrics::Server>>> StartServers(
    const controller::ControllerOptions& o, const controller::metrics::ControllerMetrics* metrics,
    const controller::reconcile::Manager* manager) {
  std::vector<controller::metrics::ReadinessCheck> checks = {
      {"informers-synced", [manager]() -> Status {
         return manager->Synced() ? Status::Ok() : Status::Unavailable("informer caches not synced yet");
       }}};
  std::vector<std::unique_ptr<controller::metrics::Server>> servers;
  bool one = o.metrics_bind_address == o.health_probe_bind_address;
  controller::metrics::ServerOptions m;
  m.bind_address = o.metrics_bind_address;
  m.metrics = metrics;
  m.serve_health = one;
  if (one) m.readiness_checks = checks;
  auto server = controller::metrics::Server::Start(m);
  if (!server.ok()) return server.status().WithContext("--metrics-bind-address");
  std::fprintf(stderr, "tandem-controller: metrics on %s\n", (*server)->address().c_str());
  servers.push_back(std::move(*server));
  if (!one) {
    controller::metrics::ServerOptions h;
    h.bind_address = o.health_probe_bind_address;
    h.readiness_checks = checks;
    auto health = controller::metrics::Server::Start(h);
    if (!health.ok()) return health.status().WithContext("--health-probe-bind-address");
    std::fprintf(stderr, "tandem-controller: health probes on %s\n", (*health)->address().c_str());
    servers.push_back(std::move(*health));
  }
  return servers;
}

int Run(const controller::ControllerOptions& o) {
  // Signals are taken by sigtimedwait below, never by a handler on a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  StatusOr<controller::kube::KubeConfig> config = controller::kube::LoadDefault(o.kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "tandem-controller: %s\n", config.status().ToString().c_str());
    return 1;
  }
  std::string identity = o.leader_election_identity.empty() ? DefaultIdentity() : o.leader_election_identity;
  controller::kube::ClientOptions client_options;
  client_options.user_agent = "tandem-controller/" + identity;
  auto client = controller::kube::Client::New(*config, client_options);
  client_options.user_agent = "tandem-controller/" + identity + " informers";
  auto informer_client = controller::kube::Client::New(*config, client_options);
  client_options.user_agent = "tandem-controller/" + identity;
  // A separate User-Agent for the Lease traffic, so the API server's logs (and kube-sim's
  // per-User-Agent stats) tell reconcile writes from leader-election writes.
  client_options.user_agent += " leader-election";
  auto lease_client = controller::kube::Client::New(*config, client_options);
  for (const auto* c : {&client, &informer_client, &lease_client}) {
    if (!c->ok()) {
      std::fprintf(stderr, "tandem-controller: %s\n", c->status().ToString().c_str());
      return 1;
    }
  }

  controller::metrics::ControllerMetrics metrics;
  controller::reconcile::ManagerOptions manager_options;
  manager_options.watch_namespace = o.watch_namespace;
  manager_options.workers = o.workers;
  manager_options.plan.default_image = o.agent_image;
  manager_options.qps = o.qps;
  manager_options.burst = o.burst;
  manager_options.resync_period = std::chrono::seconds(o.resync_period_s);
  manager_options.autoscale_interval = std::chrono::seconds(o.autoscale_interval_s);
  manager_options.scrape_timeout = std::chrono::milliseconds(o.scrape_timeout_ms);
  manager_options.prometheus_url = o.prometheus_url;
  manager_options.prometheus_selector = o.prometheus_selector;
  manager_options.prometheus_latency_selector = o.prometheus_latency_selector;
  manager_options.prometheus_rate_window = o.prometheus_rate_window;
  manager_options.informer_client = informer_client->get();
  controller::reconcile::Manager manager(client->get(), &metrics, manager_options);
  auto servers = StartServers(o, &metrics, &manager);
  if (!servers.ok()) {
    std::fprintf(stderr, "tandem-controller: %s\n", servers.status().ToString().c_str());
    return 1;
  }
  manager.StartInformers();

  std::unique_ptr<controller::runtime::LeaderElector> elector;
  if (o.leader_elect) {
    controller::runtime::LeaderElectionConfig le;
    le.lease_namespace = o.leader_election_namespace;
    le.lease_name = o.leader_election_id;
    le.identity = identity;
    le.lease_duration = std::chrono::seconds(o.lease_duration_s);
    le.renew_deadline = std::chrono::seconds(o.renew_deadline_s);
    le.retry_period = std::chrono::seconds(o.retry_period_s);
    le.on_started_leading = [&manager, &metrics, identity] {
      TANDEM_LOG(Info) << identity << " leads; starting workers";
      metrics.SetLeader(true);
      manager.StartWorkers();
    };
    le.on_stopped_leading = [&metrics, identity] {
      TANDEM_LOG(Info) << identity << " stopped leading";
      metrics.SetLeader(false);
    };
    le.on_new_leader = [](const std::string& holder) { TANDEM_LOG(Info) << "leader is " << holder; };
    auto created = controller::runtime::LeaderElector::New(lease_client->get(), le);
    if (!created.ok()) {
      std::fprintf(stderr, "tandem-controller: %s\n", created.status().ToString().c_str());
      return 1;
    }
    elector = std::move(*created);
    Status fenced = elector->InstallWriteFence(client->get());
    if (!fenced.ok()) {
      std::fprintf(stderr, "tandem-controller: %s\n", fenced.ToString().c_str());
      return 1;
    }
    elector->Start();
  } else {
    manager.StartWorkers();
  }
  TANDEM_LOG(Info) << "tandem-controller " << identity << " started (namespace '"
                   << (o.watch_namespace.empty() ? "*" : o.watch_namespace) << "')";

  int exit_code = 0;
  timespec tick{0, 100'000'000};
  while (true) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      TANDEM_LOG(Info) << "signal " << sig << ": shutting down";
      break;
    }
    if (elector != nullptr && elector->Done()) {
      TANDEM_LOG(Warning) << "lost the leader Lease: exiting";
      exit_code = 1;
      break;
    }
  }
  if (elector != nullptr) elector->Stop();  // fences writes and releases the Lease first
  manager.Stop();
  for (auto& server : *servers) server->Stop();
  TANDEM_LOG(Info) << "stopped after " << manager.reconciles() << " reconciles";
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      Usage();
      return 0;
    }
  }
  StatusOr<controller::ControllerOptions> options = controller::ParseControllerFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "tandem-controller: %s\n", options.status().ToString().c_str());
    return 2;
  }
  return Run(*options);
}
