#include "engine/kv/page_checks.h"

namespace tandem::engine::kv {

bool CheckPages(const PageCheck* checks, size_t n, const uint64_t* generation, const uint32_t* transfer_tag,
                size_t num_pages, uint8_t* item_failed) {
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (PageCheckFails(checks[i], generation, transfer_tag, num_pages)) {
      item_failed[checks[i].item] = 1;
      any = true;
    }
  }
  return any;
}

}  // namespace tandem::engine::kv
