#include "engine/bench/read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <immintrin.h>
#include <sys/mman.h>

#include "engine/core/aligned_buffer.h"

namespace tandem::engine::bench {
namespace {

uint64_t NextRandom(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

__attribute__((target("avx2"))) uint64_t ReadStreams(const uint8_t* base, int64_t bytes, int streams) {
  // `streams` independent sequential readers over equal slices of [base, base + bytes).
  const int64_t slice = bytes / streams / 32 * 32;
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (int64_t off = 0; off < slice; off += 64) {
    for (int s = 0; s < streams; ++s) {
      const __m256i* p = reinterpret_cast<const __m256i*>(base + s * slice + off);
      acc[s] = _mm256_or_si256(acc[s], _mm256_xor_si256(_mm256_load_si256(p), _mm256_load_si256(p + 1)));
    }
  }
  __m256i all = _mm256_or_si256(_mm256_or_si256(acc[0], acc[1]), _mm256_or_si256(acc[2], acc[3]));
  return static_cast<uint64_t>(_mm256_extract_epi64(all, 0));
}

struct ReadBuffer {
  int64_t bytes = 512ll << 20;
  uint8_t* data = nullptr;
  bool huge = true;
  explicit ReadBuffer(bool huge_pages) : huge(huge_pages) {
    if (huge) {
      data = static_cast<uint8_t*>(internal::AllocateAligned(static_cast<size_t>(bytes)));
    } else {
      data = static_cast<uint8_t*>(std::aligned_alloc(4096, static_cast<size_t>(bytes)));
      (void)madvise(data, static_cast<size_t>(bytes), MADV_NOHUGEPAGE);
    }
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < bytes; i += 8) {
      uint64_t v = NextRandom(&s);
      std::memcpy(data + i, &v, 8);
    }
  }
  ~ReadBuffer() { huge ? internal::FreeAligned(data) : std::free(data); }
};

// Each buffer is allocated on first use only: model_bench never needs the 4 KiB-page one.
ReadBuffer& Buffer(bool huge_pages) {
  if (huge_pages) {
    static ReadBuffer huge(true);
    return huge;
  }
  static ReadBuffer small(false);
  return small;
}

}  // namespace

int64_t ReadBufferBytes() { return Buffer(true).bytes; }

double ReadPass(int threads, int streams, bool huge_pages) {
  ReadBuffer& b = Buffer(huge_pages);
  const int64_t per_thread = b.bytes / threads;
  std::vector<std::thread> pool;
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { sink[t] = ReadStreams(b.data + t * per_thread, per_thread, streams); });
  }
  for (auto& th : pool) th.join();
  volatile uint64_t keep = 0;
  for (uint64_t v : sink) keep = keep ^ v;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double MeasuredReadBandwidth() {
  static const double bw = [] {
    double best = 1e30;
    for (int i = 0; i < 8; ++i) best = std::min(best, ReadPass(2, 4));
    return static_cast<double>(ReadBufferBytes()) / best;
  }();
  return bw;
}

}  // namespace tandem::engine::bench
