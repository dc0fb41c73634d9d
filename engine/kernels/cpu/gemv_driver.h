#pragma once
// The GEMV driver every ISA's kernel file shares (avx2/gemv_avx2.cc, avx512/gemv_avx512.cc): it
// walks activation slices and blocks of weight rows and calls that ISA's block kernels, so an ISA
// file holds only those kernels and their decode helpers. No intrinsics here.
//
// Each ISA file is compiled with its own -m flags, so each must get its own copy of this code: the
// Kernels type an ISA file instantiates GemvDriver with lives in that file's unnamed namespace,
// which gives every instantiation over it internal linkage. The linker then never keeps the
// AVX-512 copy of a helper for the AVX2 path (as it may for a plain inline function).

#include <cstdint>

#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu {

// Kernels derives from GemvDriver<Kernels> and provides, for weight rows [n, n + R):
//   template <int M, int R> static void Bf16Block(const PackedWeight& w, const float* x, float* y,
//                                                 int64_t n);  // x: [M, K], y: [M, N] (row n + r)
//   template <int M, int R> static void Fp8Block(same);         // x prescaled (matmul_internal.h)
//   template <int M, int R, bool kInt16>
//   static void Int4Block(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0,
//                         float* y, int64_t n);  // activation rows [i0, i0 + M) of xq and y
// with M in 1..4 activation rows and R in {1, the driver's row count for M and the format}, and
//   static constexpr int kFp8RowsForOneActivation;  // FP8 weight rows streamed together at M = 1
template <typename Kernels>
class GemvDriver {
 public:
  // The contracts of avx2::GemvBf16 / GemvFp8 / GemvInt4 (matmul_internal.h).
  static void Bf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);
  static void Fp8(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y, int64_t n0,
                  int64_t n1);
  static void Int4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1);

 protected:
  // Independent FMA chains per activation row: FMA latency is 4 cycles and two issue per cycle, so
  // a single activation row needs 8 chains in flight; with 3-4 rows, 2 each suffice.
  template <int M>
  static constexpr int kChains = M == 2 ? 4 : 2;

  // How far ahead of the current byte each of R row streams prefetches, for rows of row_bytes: the
  // format's distance within a row as long as a row is that long; shorter rows (the model's K =
  // 128..1024) move the whole block of R rows on, so the distance is rounded up to whole blocks (a
  // distance inside the block would only touch rows already being read).
  static int64_t PrefetchDistance(int64_t row_bytes, int rows_at_once, int64_t distance);

 private:
  enum Format { kBf16, kFp8 };

  // Weight rows streamed together for a single activation row (more activation rows: one at a
  // time). A single row is memory-bound, and one sequential stream per thread reaches clearly less
  // of the read bandwidth than several do. INT4: measured, a third and fourth stream slow it down.
  template <int M>
  static constexpr int kRowsAtOnce = M == 1 ? 4 : 1;
  // FP8: as many as the ISA file's Kernels::kFp8RowsForOneActivation (its decode's measured best).
  template <int M>
  static constexpr int kFp8RowsAtOnce = M == 1 ? Kernels::kFp8RowsForOneActivation : 1;
  template <int M>
  static constexpr int kInt4RowsAtOnce = M == 1 ? 2 : 1;

  template <Format F>
  static void Dense(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);

  // Weight rows [n0, n1) against M activation rows: blocks of R rows, the rest one at a time.
  template <Format F, int M>
  static void DenseRows(const PackedWeight& w, const float* x, float* y, int64_t n0, int64_t n1);
  template <int M, bool kInt16>
  static void Int4Rows(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0, float* y,
                       int64_t n0, int64_t n1);
};

// Defined out of the class, so not implicitly inline: GCC then inlines the same blocks into the
// row loops as it did when each ISA file had its own loops (with them defined in the class, the
// AVX-512 int4 loop for one activation row no longer took its blocks in, and ran 10-20% slower on
// cache-resident 2048-wide rows).

template <typename Kernels>
void GemvDriver<Kernels>::Bf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0,
                               int64_t n1) {
  Dense<kBf16>(w, x, m, y, n0, n1);
}

template <typename Kernels>
void GemvDriver<Kernels>::Fp8(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y,
                              int64_t n0, int64_t n1) {
  Dense<kFp8>(w, x_prescaled, m, y, n0, n1);
}

template <typename Kernels>
void GemvDriver<Kernels>::Int4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0,
                               int64_t n1) {
  ForEachSlice(xq.m, n0, n1, [&](int64_t i0, int64_t rows, int64_t b, int64_t e) {
    WithRows(rows, [&](auto kM) {
      if (xq.kind == Int4Activation::kInt16) {
        Int4Rows<kM, true>(w, xq, i0, y, b, e);
      } else {
        Int4Rows<kM, false>(w, xq, i0, y, b, e);
      }
    });
  });
}

template <typename Kernels>
int64_t GemvDriver<Kernels>::PrefetchDistance(int64_t row_bytes, int rows_at_once, int64_t distance) {
  if (row_bytes >= distance) return distance;
  const int64_t block = row_bytes * rows_at_once;
  return (distance + block - 1) / block * block;
}

template <typename Kernels>
template <typename GemvDriver<Kernels>::Format F>
void GemvDriver<Kernels>::Dense(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0,
                                int64_t n1) {
  ForEachSlice(m, n0, n1, [&](int64_t i0, int64_t rows, int64_t b, int64_t e) {
    WithRows(rows, [&](auto kM) { DenseRows<F, kM>(w, x + i0 * w.cols(), y + i0 * w.rows(), b, e); });
  });
}

template <typename Kernels>
template <typename GemvDriver<Kernels>::Format F, int M>
void GemvDriver<Kernels>::DenseRows(const PackedWeight& w, const float* x, float* y, int64_t n0, int64_t n1) {
  constexpr int R = F == kBf16 ? kRowsAtOnce<M> : kFp8RowsAtOnce<M>;
  int64_t n = n0;
  if constexpr (F == kBf16) {
    for (; n + R <= n1; n += R) Kernels::template Bf16Block<M, R>(w, x, y, n);
    for (; n < n1; ++n) Kernels::template Bf16Block<M, 1>(w, x, y, n);
  } else {
    for (; n + R <= n1; n += R) Kernels::template Fp8Block<M, R>(w, x, y, n);
    for (; n < n1; ++n) Kernels::template Fp8Block<M, 1>(w, x, y, n);
  }
}

template <typename Kernels>
template <int M, bool kInt16>
void GemvDriver<Kernels>::Int4Rows(const PackedWeight& w, const QuantizedActivations& xq, int64_t i0,
                                   float* y, int64_t n0, int64_t n1) {
  constexpr int R = kInt4RowsAtOnce<M>;
  int64_t n = n0;
  for (; n + R <= n1; n += R) Kernels::template Int4Block<M, R, kInt16>(w, xq, i0, y, n);
  for (; n < n1; ++n) Kernels::template Int4Block<M, 1, kInt16>(w, xq, i0, y, n);
}

}  // namespace tandem::engine::kernels::cpu
