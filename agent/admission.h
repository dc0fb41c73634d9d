#pragma once
// Admission to the OpenAI front: a bounded number of requests in flight, shared between tenants by
// weighted fair queueing, so one tenant's burst cannot starve the others.
//
// Every request needs one of `max_inflight` slots for its whole life. A free slot goes at once to
// a request whose tenant is under its cap (when nobody waits); otherwise the request waits in its
// tenant's queue (at most `max_queued_per_tenant` deep, at most `queue_timeout_ms`). Each freed
// slot goes to the waiting tenant with the fewest slots per unit of weight (ties: the longest
// waiting head), so a tenant that just arrived is served before one already holding many. A
// tenant never holds more than `tenant_max_inflight` slots, which keeps room for the others while
// one bursts. A request refused (queue full, timeout, cap) is ResourceExhausted: 429 with
// Retry-After; its client going away while it waits is Cancelled. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"

namespace tandem::agent {

struct AdmissionOptions {
  int64_t max_inflight = 256;              // slots, all tenants together
  int64_t tenant_max_inflight = 0;         // slots one tenant may hold (0: max_inflight)
  int64_t max_queued_per_tenant = 64;      // waiting requests per tenant; more get 429 at once
  int64_t queue_timeout_ms = 10'000;       // a request waiting longer gets 429
  std::map<std::string, int64_t> weights;  // per tenant, >= 1; a tenant not listed weighs 1
};

class Admission {
 public:
  // Holds one slot; releasing it (destruction) hands the slot to the next waiter.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept : owner_(other.owner_), tenant_(std::move(other.tenant_)) {
      other.owner_ = nullptr;
    }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }
    void Release();

   private:
    friend class Admission;
    Ticket(Admission* owner, std::string tenant) : owner_(owner), tenant_(std::move(tenant)) {}
    Admission* owner_ = nullptr;
    std::string tenant_;
  };

  struct Counters {
    int64_t in_flight = 0;
    int64_t queued = 0;
    uint64_t admitted = 0;
    uint64_t queue_full = 0;  // refused at once: the tenant's queue was full
    uint64_t timed_out = 0;   // refused after waiting queue_timeout_ms
    uint64_t cancelled = 0;   // the client left while waiting
  };

  explicit Admission(AdmissionOptions options);

  // A slot for `tenant`, waiting as described above. `cancelled` (may be empty) is polled while
  // waiting. REQUIRES: the Admission outlives the ticket.
  StatusOr<Ticket> Acquire(const std::string& tenant, const std::function<bool()>& cancelled = {});

  Counters counters() const;
  // Slots `tenant` holds now.
  int64_t held(const std::string& tenant) const;

 private:
  struct Waiter {
    uint64_t seq = 0;
    bool granted = false;
  };
  struct Tenant {
    int64_t held = 0;
    int64_t weight = 1;
    std::deque<std::shared_ptr<Waiter>> waiting;
  };

  Tenant& TenantOf(const std::string& name);  // REQUIRES: mu_ held
  void Release(const std::string& tenant);
  void Dispatch();  // hands free slots to waiters; REQUIRES: mu_ held

  const AdmissionOptions options_;
  const int64_t tenant_cap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Tenant> tenants_;
  int64_t in_flight_ = 0;
  int64_t queued_ = 0;
  uint64_t next_seq_ = 0;
  Counters counters_;
};

}  // namespace tandem::agent
