#pragma once
// CPU matrix kernels for Linear layers in every weight format: y[m, N] = x[m, K] · Wᵀ.
//
// Decode (m <= MatmulOptions::gemv_max_batch) streams the weights once (GEMV, memory-bound);
// prefill (larger m) dequantizes panels of W into an L1-sized fp32 buffer and runs a
// register-blocked FMA micro-kernel (GEMM, compute-bound). Activations are fp32 (or bf16 through
// MatmulBf16), accumulation is fp32. AVX2+FMA+F16C kernels are picked at run time when the CPU
// has them, and for decode AVX-512 (F/BW/VL/DQ/VNNI) ones where it has those too; a portable C++
// path runs elsewhere. The oracle is MatmulRef (double accumulation,
// straight from checkpoint layout).

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/core/aligned_buffer.h"
#include "engine/core/dtype.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/weights.h"

namespace tandem::engine::kernels::cpu {

// A Linear weight repacked once at load time into the layout the kernels stream.
class PackedWeight {
 public:
  // Copies (and for int4, reorders) the checkpoint tensors. Errors on inconsistent shapes.
  static StatusOr<PackedWeight> FromBf16(const Bf16WeightView& w);
  static StatusOr<PackedWeight> FromFp8(const Fp8BlockWeightView& w);
  static StatusOr<PackedWeight> FromInt4(const Int4GroupWeightView& w);

  WeightFormat format() const { return format_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Bytes one GEMV streams: weights plus scales, as stored here.
  int64_t StreamedBytes() const;

  // Layouts (N = rows, K = cols):
  //   bf16: bf16_  [N, K] bf16 bits
  //   fp8:  fp8_   [N, K] e4m3 codes; scale_ [ceil(N/128), ceil(K/128)] fp32
  //   int4: int4_  [N, G, 16] bytes, G = ceil(K/32): byte i of a group holds element i in its
  //                low nibble and element i+16 in its high nibble, as (q + 8); padding is q = 0.
  //         int4_scale_ [N, G] bf16, as in the checkpoint (streamed with the nibbles)
  const uint16_t* bf16() const { return bf16_.data(); }
  const uint8_t* fp8() const { return fp8_.data(); }
  const uint8_t* int4() const { return int4_.data(); }
  const float* scale() const { return scale_.data(); }               // fp8 block scales
  const uint16_t* int4_scale() const { return int4_scale_.data(); }  // int4 group scales (bf16)
  int64_t groups() const { return (cols_ + kInt4GroupSize - 1) / kInt4GroupSize; }

  // Rows [r0, r1) and columns [c0, c1) as a weight of their own, in this format (a tensor-parallel
  // shard: heads' rows, a row-parallel layer's columns). Each bound must fall on the format's
  // block grid (fp8: multiples of 128 rows and columns; int4: multiples of 32 columns) or at the
  // end of the dimension, so that every block keeps its scale: InvalidArgument otherwise, or
  // for an empty or out-of-range slice.
  StatusOr<PackedWeight> Slice(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const;

 private:
  WeightFormat format_ = WeightFormat::kBf16;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  AlignedBuffer<uint16_t> bf16_;
  AlignedBuffer<uint8_t> fp8_;
  AlignedBuffer<uint8_t> int4_;
  AlignedBuffer<float> scale_;
  AlignedBuffer<uint16_t> int4_scale_;
};

// How INT4 GEMV treats activations. kInt16 quantizes each group of 32 activations to int16 with
// its own scale (15-bit precision: W4A16 results to within ~1e-5 relative, the exact path);
// kInt8 quantizes to int8 (faster, ~1e-2 relative: report its fidelity before using it).
enum class Int4Activation { kInt16, kInt8 };

// How the FP8 GEMV decodes e4m3 codes on AVX2 and AVX-512. kHalf goes through fp16 (vcvtph2ps),
// kDirect shifts each code straight into fp32's fields (no vcvtph2ps: ~1.6x cheaper per weight on
// AMD Zen, but its e4m3 subnormals are fp32 subnormals, which cost a microcode assist per FMA on
// Intel cores). kAuto takes kDirect where an FMA on a subnormal input was measured to run at full
// speed. Both give the same sums, within fp32 reassociation.
enum class Fp8Decode { kAuto, kHalf, kDirect };

struct MatmulOptions {
  Int4Activation int4_activation = Int4Activation::kInt16;
  Fp8Decode fp8_decode = Fp8Decode::kAuto;
  bool force_portable = false;  // ignore AVX2 and AVX-512 even when present (tests, benchmarks)
  bool allow_avx512 = true;     // false: decode takes the AVX2 kernels even where AVX-512 runs
  int64_t gemv_max_batch = 16;  // m above this takes the GEMM path (crossover measured: docs/performance.md)
};

// y[m, N] = x[m, K] · Wᵀ. x: [m, K] fp32 row-major; y: [m, N] fp32 row-major.
// REQUIRES: m >= 1; pool non-null. Errors: InvalidArgument on m < 1.
Status Matmul(const PackedWeight& w, const float* x, int64_t m, float* y, ThreadPool* pool,
              const MatmulOptions& options = {});

// The same with bf16 activations (x: [m, K] bf16 bits).
Status MatmulBf16(const PackedWeight& w, const uint16_t* x, int64_t m, float* y, ThreadPool* pool,
                  const MatmulOptions& options = {});

// Oracles: double accumulation over weights decoded element by element from checkpoint layout.
void MatmulRef(const Bf16WeightView& w, const float* x, int64_t m, float* y);
void MatmulRef(const Fp8BlockWeightView& w, const float* x, int64_t m, float* y);
void MatmulRef(const Int4GroupWeightView& w, const float* x, int64_t m, float* y);

// Row n of w as fp32 (out: [w.cols()]): each checkpoint value times its scale, rounded once, the bits
// of the Dequantize*Ref oracles. SIMD (AVX2 + F16C) unless the portable path is forced or the host
// lacks it. For code that reads a few rows of a weight itself (MLA's W_UK / W_UV rows).
void DecodeWeightRow(const PackedWeight& w, int64_t n, float* out, const MatmulOptions& options = {});

// Which implementation Matmul's decode (GEMV) path would use on this machine: "avx512", "avx2" or
// "portable". The GEMM path (m > gemv_max_batch) is AVX2 whenever this is not "portable".
const char* MatmulIsa(const MatmulOptions& options = {});
// The FP8 decode the GEMV path takes here: "direct", "half" or "portable" (logs, benchmarks).
const char* MatmulFp8Decode(const MatmulOptions& options = {});

}  // namespace tandem::engine::kernels::cpu
