#include "engine/runtime/integrity_log.h"

#include <algorithm>

#include "common/logging.h"

namespace tandem::engine::runtime {

bool TokenBucket::Allow(int64_t now_nanos) {
  if (started_ && now_nanos > last_nanos_) {
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_nanos - last_nanos_) * 1e-9 * per_second_);
  }
  if (!started_ || now_nanos > last_nanos_) last_nanos_ = now_nanos;
  started_ = true;
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

std::string FormatIntegrityIncident(const kv::IntegrityIncident& incident) {
  auto page = [](kv::PageId p) { return p == kv::kInvalidPage ? std::string("none") : std::to_string(p); };
  return "request=" + std::to_string(incident.request) +
         " logical_page=" + std::to_string(incident.logical_page) +
         " physical_page=" + page(incident.physical_page) + " expected_page=" + page(incident.expected_page) +
         " reason=" + kv::MismatchReasonName(incident.reason) +
         " expected_generation=" + std::to_string(incident.expected_generation) +
         " found_generation=" + std::to_string(incident.found_generation) +
         " expected_transfer_tag=" + std::to_string(incident.expected_transfer_tag) +
         " found_transfer_tag=" + std::to_string(incident.found_transfer_tag);
}

bool IntegrityIncidentLog::Report(const kv::IntegrityIncident& incident, int64_t now_nanos) {
  if (!bucket_.Allow(now_nanos)) {
    ++suppressed_since_logged_;
    ++suppressed_total_;
    return false;
  }
  TANDEM_LOG(Error) << "kv_integrity_abort " << FormatIntegrityIncident(incident)
                    << " suppressed=" << suppressed_since_logged_;
  suppressed_since_logged_ = 0;
  return true;
}

}  // namespace tandem::engine::runtime
