#pragma once
// Transfers in flight and the deferred release of their pages.
//
// Every KV transfer reaches exactly one terminal state: done, failed or timed out. Until it does,
// the pages it writes into must not be reused: a request aborted mid-transfer hands its page refs
// to the ledger (DeferRelease), and they come back out (TakeReleasable) only once the transfer is
// terminal, for the step thread to Unref. A second terminal report for the same transfer is
// refused, so a late "done" after a timeout cannot release anything twice.
//
// Thread safety: all methods are thread-safe (one mutex). Transfer threads report terminal states;
// the step thread defers, expires and takes releasable pages.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/kv/kv_types.h"
#include "engine/kv/page_allocator.h"

namespace tandem::engine::kv {

enum class TransferState : uint8_t { kInFlight, kDone, kFailed, kTimedOut };
const char* TransferStateName(TransferState state);

struct TransferLedgerCounters {
  uint64_t started = 0;
  uint64_t done = 0;
  uint64_t failed = 0;
  uint64_t timed_out = 0;
  uint64_t refused_terminal_reports = 0;  // a second terminal report, or one for an unknown id
  uint64_t deferred_pages = 0;            // pages parked until a terminal state
};

class TransferLedger {
 public:
  // `clock` is not owned and must outlive the ledger.
  explicit TransferLedger(const Clock* clock) : clock_(clock) {}

  // Registers a transfer into `request`'s pages, timing out `timeout_ms` from now.
  // AlreadyExists for a transfer id in flight; InvalidArgument for timeout_ms <= 0.
  Status Begin(uint64_t transfer_id, RequestId request, int64_t timeout_ms);

  // The transfer's one terminal report. FailedPrecondition when it is not in flight (never
  // started, or already terminal). REQUIRES: terminal != kInFlight.
  Status Finish(uint64_t transfer_id, TransferState terminal);

  // Times out every transfer past its deadline; returns how many.
  size_t ExpireOverdue();

  // The request is going away. If one of its transfers is in flight, the ledger keeps `pages`
  // until that transfer is terminal and returns true; otherwise returns false and the caller
  // releases them now.
  bool DeferRelease(RequestId request, std::vector<PageRef> pages);

  // Page refs whose transfer has ended, for the caller to Unref. Empties the list.
  std::vector<PageRef> TakeReleasable();

  bool InFlight(RequestId request) const;
  size_t in_flight() const;
  size_t parked_pages() const;  // deferred, not yet releasable
  TransferLedgerCounters counters() const;

  // Fault injection (tests): DeferRelease never defers (a peer's bug: free pages at abort).
  void InjectReleaseBeforeTerminal(bool on);

 private:
  struct Transfer {
    RequestId request;
    int64_t deadline_nanos;
  };
  void EndLocked(std::unordered_map<uint64_t, Transfer>::iterator it, TransferState terminal);

  const Clock* clock_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Transfer> transfers_;            // in flight
  std::unordered_map<RequestId, int> in_flight_by_request_;     // count > 0
  std::unordered_map<RequestId, std::vector<PageRef>> parked_;  // waiting for terminal
  std::vector<PageRef> releasable_;
  TransferLedgerCounters counters_;
  bool release_before_terminal_ = false;
};

}  // namespace tandem::engine::kv
