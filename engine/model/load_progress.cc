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
    const bool big = p.bytes_total >= 1'000'000'000;
    const double unit = big ? 1e-9 : 1e-6;
    const char* name = big ? "GB" : "MB";
    const double pct = p.bytes_total > 0 ? 100.0 * p.bytes_done / p.bytes_total : 100.0;
    const double rate = p.seconds > 0 ? p.bytes_done * unit / p.seconds : 0.0;
    std::fprintf(stderr, "\rloading %5.1f%%  %.2f/%.2f %s  %.2f %s/s  %lld/%lld tensors%s", pct,
                 p.bytes_done * unit, p.bytes_total * unit, name, rate, name,
                 static_cast<long long>(p.tensors_done), static_cast<long long>(p.tensors_total),
                 last ? "\n" : "");
    std::fflush(stderr);
  };
}

}  // namespace tandem::engine::model
