#pragma once
// The machine's read-bandwidth probe, shared by the benchmarks that report a fraction of it
// (matmul_bench's GEMVs, model_bench's decode steps): a 512 MiB buffer streamed read-only by
// `threads` threads with `streams` independent sequential readers each. The buffer comes from the
// same allocator as PackedWeight (2 MiB-aligned, huge pages advised) unless huge_pages is false
// (4 KiB pages, MADV_NOHUGEPAGE, for comparison). x86-64 with AVX2 only.

#include <cstdint>

namespace tandem::engine::bench {

// Bytes of the probe buffer.
int64_t ReadBufferBytes();

// One pass over the buffer; returns seconds.
double ReadPass(int threads, int streams, bool huge_pages = true);

// Best of 8 passes of 2 threads x 4 streams over huge pages, bytes/s: the `bw_frac` denominator.
// Measured once per process.
double MeasuredReadBandwidth();

}  // namespace tandem::engine::bench
