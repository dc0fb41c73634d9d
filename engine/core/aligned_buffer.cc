#include "engine/core/aligned_buffer.h"

#include <cstdlib>

#include <sys/mman.h>

namespace tandem::engine::internal {

namespace {
constexpr size_t kHugePageBytes = 2u << 20;
}

void* AllocateAligned(size_t bytes) {
  if (bytes == 0) return nullptr;
  const bool huge = bytes >= kHugePageBytes;
  const size_t align = huge ? kHugePageBytes : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) return nullptr;
#if defined(MADV_HUGEPAGE)
  // Advice only: without THP support the memory simply stays in 4 KiB pages.
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, rounded);
  return p;
}

void FreeAligned(void* p) { std::free(p); }

}  // namespace tandem::engine::internal
