#include "controller/options.h"

#include <charconv>

namespace tandem::controller {
namespace {

Status ParseSeconds(const std::string& flag, const std::string& text, int* out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v <= 0) {
    return Status::InvalidArgument("--" + flag + ": want a positive number of seconds, got '" + text + "'");
  }
  *out = v;
  return Status::Ok();
}

Status ParseCount(const std::string& flag, const std::string& text, int* out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v <= 0) {
    return Status::InvalidArgument("--" + flag + ": want a positive integer, got '" + text + "'");
  }
  *out = v;
  return Status::Ok();
}

Status ParseNonNegativeSeconds(const std::string& flag, const std::string& text, int* out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return Status::InvalidArgument("--" + flag + ": want a number of seconds >= 0, got '" + text + "'");
  }
  *out = v;
  return Status::Ok();
}

Status ParsePositiveDouble(const std::string& flag, const std::string& text, double* out) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !(v > 0)) {
    return Status::InvalidArgument("--" + flag + ": want a positive number, got '" + text + "'");
  }
  *out = v;
  return Status::Ok();
}

Status ParseBool(const std::string& flag, const std::string& text, bool* out) {
  if (text == "true") {
    *out = true;
  } else if (text == "false") {
    *out = false;
  } else {
    return Status::InvalidArgument("--" + flag + ": want true or false, got '" + text + "'");
  }
  return Status::Ok();
}

Status Apply(const std::string& name, const std::string& value, ControllerOptions* o) {
  if (name == "kubeconfig")
    o->kubeconfig = value;
  else if (name == "metrics-bind-address")
    o->metrics_bind_address = value;
  else if (name == "health-probe-bind-address")
    o->health_probe_bind_address = value;
  else if (name == "namespace")
    o->watch_namespace = value;
  else if (name == "leader-elect")
    return ParseBool(name, value, &o->leader_elect);
  else if (name == "leader-election-namespace")
    o->leader_election_namespace = value;
  else if (name == "leader-election-id")
    o->leader_election_id = value;
  else if (name == "lease-duration")
    return ParseSeconds(name, value, &o->lease_duration_s);
  else if (name == "renew-deadline")
    return ParseSeconds(name, value, &o->renew_deadline_s);
  else if (name == "retry-period")
    return ParseSeconds(name, value, &o->retry_period_s);
  else if (name == "leader-election-identity")
    o->leader_election_identity = value;
  else if (name == "workers")
    return ParseCount(name, value, &o->workers);
  else if (name == "qps")
    return ParsePositiveDouble(name, value, &o->qps);
  else if (name == "burst")
    return ParseCount(name, value, &o->burst);
  else if (name == "resync-period")
    return ParseNonNegativeSeconds(name, value, &o->resync_period_s);
  else if (name == "autoscale-interval")
    return ParseNonNegativeSeconds(name, value, &o->autoscale_interval_s);
  else if (name == "scrape-timeout-ms")
    return ParseCount(name, value, &o->scrape_timeout_ms);
  else if (name == "prometheus-url")
    o->prometheus_url = value;
  else if (name == "prometheus-selector")
    o->prometheus_selector = value;
  else if (name == "prometheus-latency-selector")
    o->prometheus_latency_selector = value;
  else if (name == "prometheus-rate-window")
    o->prometheus_rate_window = value;
  else if (name == "agent-image")
    o->agent_image = value;
  else
    return Status::InvalidArgument("unknown flag --" + name);
  return Status::Ok();
}

// Checked whether or not --prometheus-url is set, so that a typo is found at startup.
Status ValidatePrometheusOptions(const ControllerOptions& o) {
  if (!o.prometheus_url.empty()) {
    RETURN_IF_ERROR(autoscale::ParsePromServerUrl(o.prometheus_url).status().WithContext("--prometheus-url"));
  }
  RETURN_IF_ERROR(
      autoscale::CheckSelectorTemplate(o.prometheus_selector).WithContext("--prometheus-selector"));
  RETURN_IF_ERROR(autoscale::CheckSelectorTemplate(o.prometheus_latency_selector)
                      .WithContext("--prometheus-latency-selector"));
  return autoscale::ParsePromDurationMs(o.prometheus_rate_window)
      .status()
      .WithContext("--prometheus-rate-window");
}

}  // namespace

Status ValidateControllerOptions(const ControllerOptions& o) {
  if (!(o.retry_period_s < o.renew_deadline_s && o.renew_deadline_s < o.lease_duration_s)) {
    return Status::InvalidArgument(
        "leader election needs --retry-period < --renew-deadline < --lease-duration");
  }
  if (o.workers > 64) return Status::InvalidArgument("--workers: at most 64");
  if (o.agent_image.empty()) return Status::InvalidArgument("--agent-image: must not be empty");
  if (o.leader_elect && (o.leader_election_namespace.empty() || o.leader_election_id.empty())) {
    return Status::InvalidArgument(
        "--leader-elect needs --leader-election-namespace and --leader-election-id");
  }
  return ValidatePrometheusOptions(o);
}

StatusOr<ControllerOptions> ParseControllerFlags(const std::vector<std::string>& args) {
  ControllerOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return Status::InvalidArgument("unexpected argument '" + arg + "'");
    }
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (name == "leader-elect") {
      value = "true";  // a bare boolean flag
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Status::InvalidArgument("--" + name + ": missing value");
    }
    RETURN_IF_ERROR(Apply(name, value, &o));
  }
  RETURN_IF_ERROR(ValidateControllerOptions(o));
  return o;
}

}  // namespace tandem::controller
