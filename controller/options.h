#pragma once
// tandem-controller's command-line options, with the same names and defaults as
// controller-runtime managers so operators' habits carry over.

#include <string>
#include <vector>

#include "common/status.h"
#include "controller/autoscale/prom_api.h"

namespace tandem::controller {

struct ControllerOptions {
  std::string kubeconfig;                           // empty: in-cluster service account
  std::string metrics_bind_address = ":8080";       // /metrics
  std::string health_probe_bind_address = ":8081";  // /healthz, /readyz
  std::string watch_namespace;                      // empty: all namespaces
  bool leader_elect = true;
  std::string leader_election_namespace = "tandem-system";
  std::string leader_election_id = "tandem-controller";
  int lease_duration_s = 15;
  int renew_deadline_s = 10;
  int retry_period_s = 2;
  std::string leader_election_identity;  // empty: "<hostname>_<pid>"
  int workers = 2;                       // concurrent reconciles per controller
  double qps = 20;  // reconcile API requests per second (client-go-style client-side limiter)
  int burst = 30;
  // Every cached ModelDeployment and ModelPool is reconciled again this often even without an
  // event (controller-runtime's SyncPeriod, default 10 h): drift the watches missed is repaired.
  // 0: never. Tests set seconds to force "a converged reconcile writes nothing" to be observed.
  int resync_period_s = 36000;
  // The built-in autoscaler: how often the ready members of builtin-autoscaled pools are scraped
  // and those pools re-planned (0: off; they hold), and each scrape's bound (connect included).
  int autoscale_interval_s = 15;
  int scrape_timeout_ms = 1000;
  // Set: the built-in autoscaler's signals come from this Prometheus server's query API instead of
  // the pods (docs/autoscaling.md, "Prometheus as the signal source"); each query is bounded by
  // scrape_timeout_ms and runs every autoscale_interval_s.
  std::string prometheus_url;
  // The label matchers that find a pool's series, with {namespace}, {deployment}, {pool}
  // placeholders: the gauges', and the latency histograms' (observed at the router).
  std::string prometheus_selector = std::string(autoscale::kDefaultPromSelector);
  std::string prometheus_latency_selector = std::string(autoscale::kDefaultPromLatencySelector);
  std::string prometheus_rate_window = "2m";  // the p95s' rate() range, a Prometheus duration
  std::string agent_image = "ghcr.io/tandem-dev/tandem-agent:latest";  // when spec.image is unset
};

// Parses `--name=value` / `--name value` flags (argv[0] excluded).
// Errors: unknown flags, missing values, non-integers, and lease timings that cannot work
// (retry < renew < lease, as client-go's leader election requires).
StatusOr<ControllerOptions> ParseControllerFlags(const std::vector<std::string>& args);

Status ValidateControllerOptions(const ControllerOptions& options);

}  // namespace tandem::controller
