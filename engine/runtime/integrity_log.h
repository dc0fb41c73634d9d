#pragma once
// The incident log of KV integrity aborts: one structured line per aborted request, rate-limited.
//
//   E ... engine/runtime/integrity_log.cc:NN] kv_integrity_abort request=17 logical_page=2
//       physical_page=41 expected_page=40 reason=wrong_page expected_generation=3 found_generation=5
//       expected_transfer_tag=0 found_transfer_tag=0 suppressed=0
//
// (one line; wrapped here). The line carries ids and counters only: no prompt or output text, no
// tenant. `suppressed` is how many lines the rate limit dropped since the previous logged line.
// The abort counters (EngineStats::integrity_aborts) count every abort, logged or not.
//
// Thread safety: none (the engine's step thread).

#include <cstdint>
#include <string>

#include "engine/kv/integrity_tracker.h"

namespace tandem::engine::runtime {

// A token bucket over caller-supplied monotonic times: up to `burst` events at once, refilled at
// `per_second`. REQUIRES: per_second > 0, burst >= 1.
class TokenBucket {
 public:
  TokenBucket(double per_second, double burst) : per_second_(per_second), burst_(burst), tokens_(burst) {}
  // Spends one token if there is one. Times that go backwards refill nothing.
  bool Allow(int64_t now_nanos);

 private:
  double per_second_;
  double burst_;
  double tokens_;
  int64_t last_nanos_ = 0;
  bool started_ = false;
};

// The line's fields ("request=17 logical_page=2 ... found_transfer_tag=0").
std::string FormatIntegrityIncident(const kv::IntegrityIncident& incident);

class IntegrityIncidentLog {
 public:
  static constexpr double kLinesPerSecond = 10;
  static constexpr double kBurst = 20;

  IntegrityIncidentLog() : bucket_(kLinesPerSecond, kBurst) {}

  // Logs the incident's line (level Error) unless the rate limit drops it; returns whether it
  // logged.
  bool Report(const kv::IntegrityIncident& incident, int64_t now_nanos);
  uint64_t suppressed_total() const { return suppressed_total_; }

 private:
  TokenBucket bucket_;
  uint64_t suppressed_since_logged_ = 0;
  uint64_t suppressed_total_ = 0;
};

}  // namespace tandem::engine::runtime
