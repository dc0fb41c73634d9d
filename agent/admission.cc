#include "agent/admission.h"

#include <algorithm>
#include <chrono>

namespace tandem::agent {

Admission::Ticket& Admission::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    tenant_ = std::move(other.tenant_);
    other.owner_ = nullptr;
  }
  return *this;
}

void Admission::Ticket::Release() {
  if (owner_ == nullptr) return;
  owner_->Release(tenant_);
  owner_ = nullptr;
}

Admission::Admission(AdmissionOptions options)
    : options_(std::move(options)),
      tenant_cap_(options_.tenant_max_inflight > 0
                      ? std::min(options_.tenant_max_inflight, options_.max_inflight)
                      : options_.max_inflight) {}

Admission::Tenant& Admission::TenantOf(const std::string& name) {
  auto [it, inserted] = tenants_.try_emplace(name);
  if (inserted) {
    auto w = options_.weights.find(name);
    it->second.weight = w == options_.weights.end() ? 1 : std::max<int64_t>(1, w->second);
  }
  return it->second;
}

void Admission::Dispatch() {
  while (in_flight_ < options_.max_inflight) {
    Tenant* best = nullptr;
    for (auto& [name, t] : tenants_) {
      if (t.waiting.empty() || t.held >= tenant_cap_) continue;
      if (best == nullptr) {
        best = &t;
        continue;
      }
      // Fewest slots per unit of weight: held / weight compared without division.
      const int64_t lhs = t.held * best->weight, rhs = best->held * t.weight;
      if (lhs < rhs || (lhs == rhs && t.waiting.front()->seq < best->waiting.front()->seq)) best = &t;
    }
    if (best == nullptr) return;
    best->waiting.front()->granted = true;
    best->waiting.pop_front();
    ++best->held;
    ++in_flight_;
    --queued_;
    ++counters_.admitted;
    cv_.notify_all();
  }
}

StatusOr<Admission::Ticket> Admission::Acquire(const std::string& tenant,
                                               const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  Tenant& t = TenantOf(tenant);
  if (queued_ == 0 && in_flight_ < options_.max_inflight && t.held < tenant_cap_) {
    ++t.held;
    ++in_flight_;
    ++counters_.admitted;
    return Ticket(this, tenant);
  }
  if (static_cast<int64_t>(t.waiting.size()) >= options_.max_queued_per_tenant) {
    ++counters_.queue_full;
    const bool at_cap = t.held >= tenant_cap_;
    const int64_t held = t.held;
    if (held == 0 && t.waiting.empty()) tenants_.erase(tenant);
    return Status::ResourceExhausted(
        at_cap ? "this tenant has " + std::to_string(held) +
                     " requests in flight, its limit, and a full queue; retry shortly"
               : "too many requests in flight; retry shortly");
  }
  auto waiter = std::make_shared<Waiter>();
  waiter->seq = next_seq_++;
  t.waiting.push_back(waiter);
  ++queued_;
  Dispatch();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.queue_timeout_ms);
  for (;;) {
    if (waiter->granted) return Ticket(this, tenant);
    const bool gone = cancelled && cancelled();
    if (gone || std::chrono::steady_clock::now() >= deadline) {
      Tenant& mine = tenants_.at(tenant);
      mine.waiting.erase(std::find(mine.waiting.begin(), mine.waiting.end(), waiter));
      --queued_;
      if (mine.held == 0 && mine.waiting.empty()) tenants_.erase(tenant);
      Dispatch();  // the slot this request would have had may suit another tenant's head
      if (gone) {
        ++counters_.cancelled;
        return Status::Cancelled("the client went away while its request waited for a slot");
      }
      ++counters_.timed_out;
      return Status::ResourceExhausted("no slot became free within " +
                                       std::to_string(options_.queue_timeout_ms) + " ms; retry shortly");
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void Admission::Release(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  Tenant& t = tenants_.at(tenant);
  --t.held;
  --in_flight_;
  Dispatch();
  if (t.held == 0 && t.waiting.empty()) tenants_.erase(tenant);  // bounded by active tenants
}

Admission::Counters Admission::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counters c = counters_;
  c.in_flight = in_flight_;
  c.queued = queued_;
  return c;
}

int64_t Admission::held(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.held;
}

}  // namespace tandem::agent
