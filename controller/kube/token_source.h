#pragma once
// The bearer token for requests: a static token, or one read from a file and re-read when it may
// have rotated (bound service-account tokens are replaced by the kubelet about hourly).

#include <cstdint>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace tandem::controller::kube {

class TokenSource {
 public:
  // `token_file` empty: always `static_token` (possibly empty: no Authorization header).
  // REQUIRES: clock outlives this object.
  TokenSource(std::string static_token, std::string token_file, int64_t refresh_interval_ms,
              const Clock& clock);

  // The current token; the file is re-read when refresh_interval_ms has passed since the last
  // read. A failed re-read keeps the last good token (and logs); a failed first read is an error
  // naming the file.
  StatusOr<std::string> Token();

  // After a 401: re-read the file now. Returns true when the token changed (worth retrying).
  bool Invalidate();

  bool from_file() const { return !token_file_.empty(); }

 private:
  Status ReadLocked();

  const std::string static_token_;
  const std::string token_file_;
  const int64_t refresh_interval_ns_;
  const Clock& clock_;
  std::mutex mu_;
  std::string token_;
  bool loaded_ = false;
  int64_t loaded_at_ns_ = 0;
};

}  // namespace tandem::controller::kube
