#include "controller/kube/token_source.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "common/logging.h"

namespace tandem::controller::kube {

TokenSource::TokenSource(std::string static_token, std::string token_file, int64_t refresh_interval_ms,
                         const Clock& clock)
    : static_token_(std::move(static_token)),
      token_file_(std::move(token_file)),
      refresh_interval_ns_(refresh_interval_ms * 1'000'000),
      clock_(clock) {}

Status TokenSource::ReadLocked() {
  std::ifstream in(token_file_, std::ios::binary);
  if (!in) return Status::NotFound("token file " + token_file_ + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty()) return Status::InvalidArgument("token file " + token_file_ + ": empty");
  token_ = std::move(token);
  return Status::Ok();
}

StatusOr<std::string> TokenSource::Token() {
  if (token_file_.empty()) return static_token_;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowNanos();
  if (!loaded_ || now - loaded_at_ns_ >= refresh_interval_ns_) {
    Status read = ReadLocked();
    if (!read.ok()) {
      if (!loaded_) return read;
      TANDEM_LOG(Warning) << "keeping the previous bearer token: " << read.ToString();
    }
    loaded_ = true;
    loaded_at_ns_ = now;
  }
  return token_;
}

bool TokenSource::Invalidate() {
  if (token_file_.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string before = token_;
  Status read = ReadLocked();
  if (!read.ok()) {
    TANDEM_LOG(Warning) << "re-reading the bearer token after 401: " << read.ToString();
    return false;
  }
  loaded_ = true;
  loaded_at_ns_ = clock_.NowNanos();
  return token_ != before;
}

}  // namespace tandem::controller::kube
