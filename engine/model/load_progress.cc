#include <chrono>
#include <cstdio>
#include <memory>

#include "engine/model/loader.h"

namespace tandem::engine::model {

LoadProgressFn StderrProgressBar() {
  // Shared state: the returned function is copied into the loader.
  auto last_draw = std::make_shared<std::chrono::steady_clock::time_point>();
  return [last_draw](const LoadProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.tensors_done == p.tensors_total;
    if (!last && now - *last_draw < std::chrono::milliseconds(100)) return;
    *last_draw = now;
    const double gb = 1e-9;
    const double pct = p.bytes_total > 0 ? 100.0 * p.bytes_done / p.bytes_total : 100.0;
    const double rate = p.seconds > 0 ? p.bytes_done * gb / p.seconds : 0.0;
    std::fprintf(stderr, "\rloading %5.1f%%  %.2f/%.2f GB  %.2f GB/s  %lld/%lld tensors%s", pct,
                 p.bytes_done * gb, p.bytes_total * gb, rate, static_cast<long long>(p.tensors_done),
                 static_cast<long long>(p.tensors_total), last ? "\n" : "");
    std::fflush(stderr);
  };
}

}  // namespace tandem::engine::model
