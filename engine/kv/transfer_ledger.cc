#include "engine/kv/transfer_ledger.h"

#include <string>
#include <utility>

namespace tandem::engine::kv {

const char* TransferStateName(TransferState state) {
  switch (state) {
    case TransferState::kInFlight: return "in_flight";
    case TransferState::kDone: return "done";
    case TransferState::kFailed: return "failed";
    case TransferState::kTimedOut: return "timed_out";
  }
  return "unknown";
}

Status TransferLedger::Begin(uint64_t transfer_id, RequestId request, int64_t timeout_ms) {
  if (timeout_ms <= 0) return Status::InvalidArgument("a transfer needs a positive timeout");
  std::lock_guard<std::mutex> lock(mu_);
  if (transfers_.count(transfer_id) != 0) {
    return Status::AlreadyExists("transfer " + std::to_string(transfer_id) + " is already in flight");
  }
  transfers_.emplace(transfer_id, Transfer{request, clock_->NowNanos() + timeout_ms * 1'000'000});
  ++in_flight_by_request_[request];
  ++counters_.started;
  return Status::Ok();
}

void TransferLedger::EndLocked(std::unordered_map<uint64_t, Transfer>::iterator it, TransferState terminal) {
  const RequestId request = it->second.request;
  transfers_.erase(it);
  switch (terminal) {
    case TransferState::kDone: ++counters_.done; break;
    case TransferState::kFailed: ++counters_.failed; break;
    case TransferState::kTimedOut: ++counters_.timed_out; break;
    case TransferState::kInFlight: break;
  }
  auto count = in_flight_by_request_.find(request);
  if (--count->second > 0) return;
  in_flight_by_request_.erase(count);
  auto parked = parked_.find(request);
  if (parked == parked_.end()) return;
  releasable_.insert(releasable_.end(), parked->second.begin(), parked->second.end());
  parked_.erase(parked);
}

Status TransferLedger::Finish(uint64_t transfer_id, TransferState terminal) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = transfers_.find(transfer_id);
  if (it == transfers_.end() || terminal == TransferState::kInFlight) {
    ++counters_.refused_terminal_reports;
    return Status::FailedPrecondition("transfer " + std::to_string(transfer_id) +
                                      " is not in flight; terminal state '" + TransferStateName(terminal) +
                                      "' ignored");
  }
  EndLocked(it, terminal);
  return Status::Ok();
}

size_t TransferLedger::ExpireOverdue() {
  const int64_t now = clock_->NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  size_t expired = 0;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    auto next = std::next(it);
    if (it->second.deadline_nanos <= now) {
      EndLocked(it, TransferState::kTimedOut);
      ++expired;
    }
    it = next;
  }
  return expired;
}

bool TransferLedger::DeferRelease(RequestId request, std::vector<PageRef> pages) {
  std::lock_guard<std::mutex> lock(mu_);
  if (release_before_terminal_ || in_flight_by_request_.count(request) == 0) return false;
  counters_.deferred_pages += pages.size();
  std::vector<PageRef>& parked = parked_[request];
  parked.insert(parked.end(), pages.begin(), pages.end());
  return true;
}

std::vector<PageRef> TransferLedger::TakeReleasable() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(releasable_, {});
}

bool TransferLedger::InFlight(RequestId request) const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_by_request_.count(request) != 0;
}

size_t TransferLedger::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return transfers_.size();
}

size_t TransferLedger::parked_pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [request, pages] : parked_) n += pages.size();
  return n;
}

TransferLedgerCounters TransferLedger::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void TransferLedger::InjectReleaseBeforeTerminal(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  release_before_terminal_ = on;
}

}  // namespace tandem::engine::kv
