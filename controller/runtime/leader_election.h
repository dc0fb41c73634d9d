#pragma once
// Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules:
//  - A candidate takes the Lease when it does not exist, when its holderIdentity is empty
//    (released), or when the record has not changed for leaseDurationSeconds as observed on the
//    candidate's own clock (expiry is never judged by comparing clocks across machines).
//  - The leader renews every retry_period; if no renew succeeds within renew_deadline it stops
//    leading. Run() then returns (like client-go: the process is expected to exit or restart).
//  - On Stop() with release_on_cancel the leader clears holderIdentity so another candidate can
//    take over at once.
//  - Write fence: InstallWriteFence(client) makes every write through `client` fail
//    (FailedPrecondition) unless this elector leads AND its last successful renew started less
//    than renew_deadline ago on its clock. Because renew_deadline < lease_duration, a deposed or
//    stalled leader stops writing before any other candidate can consider the Lease expired.
// The Lease is read and written through `lease_client`, which must not be fenced by this elector.
//
// Callbacks run on the elector's thread and must not block for long (start or stop the
// controllers on other threads).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json_fwd.hpp>

#include "common/clock.h"
#include "common/status.h"

namespace tandem::controller::kube {
class CancelToken;
class Client;
}  // namespace tandem::controller::kube

namespace tandem::controller::runtime {

class Sleeper;

struct LeaderElectionConfig {
  std::string lease_namespace;  // e.g. "tandem-system"
  std::string lease_name;       // e.g. "tandem-controller"
  std::string identity;         // unique per candidate, e.g. "<hostname>_<uuid>"
  std::chrono::nanoseconds lease_duration = std::chrono::seconds(15);
  std::chrono::nanoseconds renew_deadline = std::chrono::seconds(10);
  std::chrono::nanoseconds retry_period = std::chrono::seconds(2);
  bool release_on_cancel = true;
  const Clock* clock = nullptr;  // nullptr: SteadyClock::Default()
  // Each may be empty.
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;                        // only after on_started_leading
  std::function<void(const std::string& identity)> on_new_leader;  // a different holder observed
};

// InvalidArgument unless names and identity are set, 0 < retry < renew deadline < lease duration
// (the ordering client-go requires; see controller/options.cc) and the lease duration is whole
// seconds (what the Lease can hold).
Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config);

// Counters for tests and metrics.
struct LeaderElectionStats {
  int64_t attempts = 0;         // tryAcquireOrRenew calls
  int64_t acquisitions = 0;     // times this elector became leader
  int64_t renewals = 0;         // successful renews while leading
  int64_t failed_attempts = 0;  // attempts that errored (API errors, conflicts)
  int64_t fenced_writes = 0;    // writes the installed fence refused
  std::string observed_holder;  // holderIdentity last read from the Lease
  // The elector's waits between attempts: how many it began, and the clock time the latest one
  // ends. A test driving a FakeClock advances to next_wake_nanos and waits for `waits` to grow.
  int64_t waits = 0;
  int64_t next_wake_nanos = 0;
};

class LeaderElector {
 public:
  // `lease_client` must outlive the elector. Errors: ValidateLeaderElectionConfig's.
  static StatusOr<std::unique_ptr<LeaderElector>> New(kube::Client* lease_client,
                                                      LeaderElectionConfig config);
  // Stops and joins (releasing the Lease when configured).
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Fences writes through `client` on this elector's leadership (see the file comment). The fence
  // outlives the elector: once the elector is gone, writes through `client` stay refused.
  // InvalidArgument when `client` is the lease client (its Lease writes would be fenced too).
  Status InstallWriteFence(kube::Client* client);

  // Acquires (retrying every retry_period), then renews until leadership is lost or Stop();
  // returns then. REQUIRES: at most once, and not with Start.
  void Run();
  // Run() on a new thread. REQUIRES: at most once.
  void Start();
  // Ends Run: stops renewing, closes the fence, releases the Lease when leading and
  // release_on_cancel, calls on_stopped_leading when it was leading, joins. Idempotent.
  void Stop();

  // Leading, and the last successful renew started less than renew_deadline ago.
  bool IsLeader() const;
  // True after Run has returned (lost leadership or stopped).
  bool Done() const { return done_.load(); }
  LeaderElectionStats Stats() const;
  const LeaderElectionConfig& config() const { return config_; }

 private:
  struct FenceState;  // shared with installed fences
  enum class Attempt { kHeld, kHeldByOther, kError };

  LeaderElector(kube::Client* lease_client, LeaderElectionConfig config);
  Attempt TryAcquireOrRenew();  // one Get + Create/Update of the Lease
  bool Acquire();               // retries until acquired (true) or stopped (false)
  void RenewLoop();             // until the renew deadline passes without a renew, or stopped
  void Release();               // clears holderIdentity if we still hold the Lease
  void SetLeading(bool leading, int64_t renew_start_nanos);
  bool SleepUntil(int64_t wake_nanos);  // records the wait in stats_; false when stopped
  // Records the Lease spec as read; REQUIRES: mu_ held. Returns the holder to announce through
  // on_new_leader ("" when unchanged).
  std::string ObserveLocked(const nlohmann::json& spec, const std::string& resource_version, int64_t now);

  kube::Client* const lease_client_;
  const LeaderElectionConfig config_;
  const Clock& clock_;
  std::shared_ptr<FenceState> fence_;
  std::unique_ptr<kube::CancelToken> cancel_;  // aborts in-flight Lease calls on Stop
  std::unique_ptr<Sleeper> sleeper_;
  std::thread thread_;
  std::atomic<bool> started_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_requested_{false};

  mutable std::mutex mu_;              // guards what follows
  std::string observed_record_;        // the Lease spec as last read, serialized
  int64_t observed_nanos_ = 0;         // local time when observed_record_ last changed
  int64_t observed_expiry_nanos_ = 0;  // observed_nanos_ + the record's lease duration
  std::string observed_rv_;            // the Lease's metadata.resourceVersion
  LeaderElectionStats stats_;
};

}  // namespace tandem::controller::runtime
