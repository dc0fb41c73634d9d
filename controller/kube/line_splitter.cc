#include "controller/kube/line_splitter.h"

#include <string>
#include <utility>

namespace tandem::controller::kube {

bool LineSplitter::Feed(std::string_view data, const OnLine& on_line) {
  if (stopped_ || !status_.ok()) return false;
  // Only the new bytes are searched, so a long line arriving in many pieces costs linear time.
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const std::string_view piece = data.substr(0, nl);
    if (pending_.size() + piece.size() > max_line_bytes_) {
      status_ =
          Status::InvalidArgument("stream line longer than " + std::to_string(max_line_bytes_) + " bytes");
      pending_.clear();
      return false;
    }
    if (nl == std::string_view::npos) {
      pending_.append(piece);
      return true;
    }
    data.remove_prefix(nl + 1);
    if (pending_.empty()) {
      if (!Deliver(piece, on_line)) return false;
    } else {
      pending_.append(piece);
      const std::string line = std::exchange(pending_, {});
      if (!Deliver(line, on_line)) return false;
    }
  }
  return true;
}

void LineSplitter::Finish(const OnLine& on_line) {
  if (stopped_ || !status_.ok()) return;
  const std::string line = std::exchange(pending_, {});
  Deliver(line, on_line);
}

bool LineSplitter::Deliver(std::string_view line, const OnLine& on_line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return true;
  if (!on_line(line)) {
    stopped_ = true;
    return false;
  }
  return true;
}

}  // namespace tandem::controller::kube
