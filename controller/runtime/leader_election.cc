#include "controller/runtime/leader_election.h"

#include <ctime>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "controller/kube/cancel.h"
#include "controller/kube/client.h"
#include "controller/runtime/clock_wait.h"

namespace tandem::controller::runtime {
namespace {

using Json = nlohmann::json;
using std::chrono::nanoseconds;

// Kubernetes MicroTime: "2026-12-01T01:02:03.456789Z". Informational only: expiry is judged by
// the local observation time, never by these timestamps.
std::string MicroTimeNow() {
  auto now = std::chrono::system_clock::now();
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(micros / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(micros % 1'000'000));
  return buf;
}

int64_t Seconds(nanoseconds d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

// Field readers that tolerate any shape: the Lease comes from outside and may be malformed.
std::string StrField(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}
int64_t IntField(const Json& obj, const char* key) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}
const Json& ObjField(const Json& obj, const char* key) {
  static const Json kEmpty = Json::object();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}
std::string ResourceVersionOf(const Json& obj) {
  return StrField(ObjField(obj, "metadata"), "resourceVersion");
}

}  // namespace

// Shared between the elector and the fences it installs, so a fence stays safe to call after the
// elector is destroyed (then it refuses everything without touching the clock).
struct LeaderElector::FenceState {
  std::mutex mu;
  bool leading = false;
  int64_t valid_until_nanos = 0;  // last successful renew's start + renew_deadline
  const Clock* clock = nullptr;
  std::string lease;  // "ns/name", for messages
  int64_t refused = 0;

  bool Allowed() {  // REQUIRES: mu held
    return leading && clock->NowNanos() < valid_until_nanos;
  }
};

Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.lease_namespace.empty() || c.lease_name.empty()) {
    return Status::InvalidArgument("leader election: lease namespace and name are required");
  }
  if (c.identity.empty()) return Status::InvalidArgument("leader election: identity is required");
  if (!(nanoseconds(0) < c.retry_period && c.retry_period < c.renew_deadline &&
        c.renew_deadline < c.lease_duration)) {
    return Status::InvalidArgument(
        "leader election needs 0 < retry period < renew deadline < lease duration");
  }
  // The Lease carries whole seconds; a fraction would be cut off and other candidates could take
  // over before this leader's renew deadline (and its write fence) ran out.
  if (c.lease_duration % std::chrono::seconds(1) != nanoseconds(0)) {
    return Status::InvalidArgument("leader election: lease duration must be a whole number of seconds");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::New(kube::Client* lease_client,
                                                            LeaderElectionConfig config) {
  if (lease_client == nullptr) return Status::InvalidArgument("leader election: no lease client");
  RETURN_IF_ERROR(ValidateLeaderElectionConfig(config));
  return std::unique_ptr<LeaderElector>(new LeaderElector(lease_client, std::move(config)));
}

LeaderElector::LeaderElector(kube::Client* lease_client, LeaderElectionConfig config)
    : lease_client_(lease_client),
      config_(std::move(config)),
      clock_(config_.clock ? *config_.clock : SteadyClock::Default()),
      fence_(std::make_shared<FenceState>()),
      cancel_(std::make_unique<kube::CancelToken>()),
      sleeper_(std::make_unique<Sleeper>(clock_)) {
  fence_->clock = &clock_;
  fence_->lease = config_.lease_namespace + "/" + config_.lease_name;
}

LeaderElector::~LeaderElector() { Stop(); }

Status LeaderElector::InstallWriteFence(kube::Client* client) {
  if (client == nullptr) return Status::InvalidArgument("leader election: no client to fence");
  if (client == lease_client_) {
    return Status::InvalidArgument("leader election: the lease client cannot be fenced (use another client)");
  }
  std::shared_ptr<FenceState> fence = fence_;
  client->SetWriteFence([fence]() -> Status {
    std::lock_guard<std::mutex> lock(fence->mu);
    if (fence->Allowed()) return Status::Ok();
    ++fence->refused;
    return Status::FailedPrecondition("not the leader of lease " + fence->lease);
  });
  return Status::Ok();
}

void LeaderElector::Start() {
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void LeaderElector::Stop() {
  stop_requested_ = true;
  cancel_->Cancel();
  sleeper_->Interrupt();
  if (thread_.joinable()) thread_.join();
}

void LeaderElector::Run() {
  started_ = true;
  if (Acquire()) {
    if (config_.on_started_leading) config_.on_started_leading();
    RenewLoop();
    SetLeading(false, 0);  // fence first: nothing written after this point
    if (stop_requested_ && config_.release_on_cancel) Release();
    TANDEM_LOG(Info) << "leader election: " << config_.identity << " stopped leading " << fence_->lease;
    if (config_.on_stopped_leading) config_.on_stopped_leading();
  }
  done_ = true;
}

bool LeaderElector::Acquire() {
  while (!stop_requested_) {
    int64_t start = clock_.NowNanos();
    Attempt result = TryAcquireOrRenew();
    if (result == Attempt::kHeld) {
      SetLeading(true, start);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.acquisitions;
      }
      TANDEM_LOG(Info) << "leader election: " << config_.identity << " acquired " << fence_->lease;
      return true;
    }
    // Sleep one retry period, or less when the holder's lease expires sooner (take over on time).
    int64_t wake = start + config_.retry_period.count();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (result == Attempt::kHeldByOther) wake = std::min(wake, observed_expiry_nanos_);
    }
    if (!SleepUntil(std::max(wake, start + 1))) return false;
  }
  return false;
}

void LeaderElector::RenewLoop() {
  int64_t last_renew_start = clock_.NowNanos();
  {
    std::lock_guard<std::mutex> lock(fence_->mu);
    last_renew_start = fence_->valid_until_nanos - config_.renew_deadline.count();
  }
  int64_t next = last_renew_start + config_.retry_period.count();
  for (;;) {
    if (!SleepUntil(next)) return;  // Stop()
    int64_t start = clock_.NowNanos();
    if (start >= last_renew_start + config_.renew_deadline.count()) {
      TANDEM_LOG(Warning) << "leader election: " << config_.identity << " could not renew " << fence_->lease
                          << " within the renew deadline";
      return;
    }
    Attempt result = TryAcquireOrRenew();
    if (result == Attempt::kHeld) {
      SetLeading(true, start);
      last_renew_start = start;
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.renewals;
      next = start + config_.retry_period.count();
    } else if (result == Attempt::kHeldByOther) {
      TANDEM_LOG(Warning) << "leader election: " << config_.identity << " lost " << fence_->lease << " to "
                          << Stats().observed_holder;
      return;
    } else {
      // Retry sooner than a full period so one failed request does not cost the lease; the
      // deadline check above ends the loop.
      next =
          std::min(start + config_.retry_period.count(), last_renew_start + config_.renew_deadline.count());
    }
  }
}

bool LeaderElector::SleepUntil(int64_t wake_nanos) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.waits;
    stats_.next_wake_nanos = wake_nanos;
  }
  return sleeper_->SleepUntil(wake_nanos);
}

void LeaderElector::SetLeading(bool leading, int64_t renew_start_nanos) {
  std::lock_guard<std::mutex> lock(fence_->mu);
  fence_->leading = leading;
  if (leading) fence_->valid_until_nanos = renew_start_nanos + config_.renew_deadline.count();
}

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> lock(fence_->mu);
  return fence_->Allowed();
}

LeaderElectionStats LeaderElector::Stats() const {
  LeaderElectionStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  std::lock_guard<std::mutex> lock(fence_->mu);
  s.fenced_writes = fence_->refused;
  return s;
}

std::string LeaderElector::ObserveLocked(const Json& spec, const std::string& resource_version, int64_t now) {
  observed_rv_ = resource_version;
  std::string record = spec.dump();
  if (record == observed_record_) return "";
  std::string holder = StrField(spec, "holderIdentity");
  std::string previous_holder = stats_.observed_holder;
  int64_t duration_s = IntField(spec, "leaseDurationSeconds");
  if (duration_s <= 0) duration_s = Seconds(config_.lease_duration);
  observed_record_ = std::move(record);
  observed_nanos_ = now;
  observed_expiry_nanos_ = now + duration_s * 1'000'000'000;
  stats_.observed_holder = holder;
  return holder != previous_holder ? holder : "";
}

LeaderElector::Attempt LeaderElector::TryAcquireOrRenew() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.attempts;
  }
  auto failed = [&](const Status& s) {
    TANDEM_LOG(Debug) << "leader election: " << config_.identity << ": " << s.ToString();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.failed_attempts;
    return Attempt::kError;
  };
  auto announce = [&](const std::string& holder) {
    if (!holder.empty() && config_.on_new_leader) config_.on_new_leader(holder);
  };
  kube::CallOptions call;
  call.cancel = cancel_.get();
  std::string now_text = MicroTimeNow();
  Json fresh_spec = {{"holderIdentity", config_.identity},
                     {"leaseDurationSeconds", Seconds(config_.lease_duration)},
                     {"acquireTime", now_text},
                     {"renewTime", now_text},
                     {"leaseTransitions", 0}};

  StatusOr<Json> got = lease_client_->Get(kube::kLease, config_.lease_namespace, config_.lease_name, call);
  if (!got.ok() && got.status().code() == StatusCode::kNotFound) {
    Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
                  {"spec", fresh_spec}};
    StatusOr<Json> created = lease_client_->Create(kube::kLease, config_.lease_namespace, lease, call);
    if (!created.ok()) return failed(created.status());
    std::string holder;
    {
      std::lock_guard<std::mutex> lock(mu_);
      holder = ObserveLocked(ObjField(*created, "spec"), ResourceVersionOf(*created), clock_.NowNanos());
    }
    announce(holder);
    return Attempt::kHeld;
  }
  if (!got.ok()) return failed(got.status());
  Json lease = std::move(got).value();
  if (!lease.is_object()) return failed(Status::Internal("the Lease is not a JSON object"));
  const Json spec = ObjField(lease, "spec");
  std::string holder = StrField(spec, "holderIdentity");
  int64_t now = clock_.NowNanos();
  std::string new_holder;
  bool held_by_other;
  {
    std::lock_guard<std::mutex> lock(mu_);
    new_holder = ObserveLocked(spec, ResourceVersionOf(lease), now);
    held_by_other = !holder.empty() && holder != config_.identity && observed_expiry_nanos_ > now;
  }
  announce(new_holder);
  if (held_by_other) return Attempt::kHeldByOther;

  int64_t transitions = IntField(spec, "leaseTransitions");
  if (holder == config_.identity) {  // renew: keep the acquisition record
    std::string acquired = StrField(spec, "acquireTime");
    if (!acquired.empty()) fresh_spec["acquireTime"] = acquired;
    fresh_spec["leaseTransitions"] = transitions;
  } else {  // take over a released or expired Lease
    fresh_spec["leaseTransitions"] = transitions + 1;
  }
  lease["spec"] = fresh_spec;  // metadata.resourceVersion stays: the update is conditional
  StatusOr<Json> updated = lease_client_->Update(kube::kLease, config_.lease_namespace, lease, call);
  if (!updated.ok()) return failed(updated.status());  // a conflict: someone else wrote first
  {
    std::lock_guard<std::mutex> lock(mu_);
    new_holder = ObserveLocked(ObjField(*updated, "spec"), ResourceVersionOf(*updated), clock_.NowNanos());
  }
  announce(new_holder);
  return Attempt::kHeld;
}

void LeaderElector::Release() {
  kube::CallOptions call;  // no cancel token: Stop() has fired it, and releasing is the point
  call.timeout_ms = Seconds(config_.renew_deadline) * 1000;
  StatusOr<Json> got = lease_client_->Get(kube::kLease, config_.lease_namespace, config_.lease_name, call);
  if (!got.ok()) {
    TANDEM_LOG(Warning) << "leader election: release " << fence_->lease << ": " << got.status().ToString();
    return;
  }
  Json lease = std::move(got).value();
  if (!lease.is_object() || StrField(ObjField(lease, "spec"), "holderIdentity") != config_.identity) return;
  std::string now_text = MicroTimeNow();
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["acquireTime"] = now_text;
  lease["spec"]["renewTime"] = now_text;
  StatusOr<Json> updated = lease_client_->Update(kube::kLease, config_.lease_namespace, lease, call);
  if (!updated.ok()) {
    TANDEM_LOG(Warning) << "leader election: release " << fence_->lease << ": "
                        << updated.status().ToString();
  }
}

}  // namespace tandem::controller::runtime
