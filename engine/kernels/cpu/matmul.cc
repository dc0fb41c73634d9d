#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul_batch.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu {
namespace {

// Rows handed to one thread at a time: whole GEMM panels, and enough GEMV rows to amortize.
constexpr int64_t kRowGrain = 16;

enum class Isa { kPortable, kAvx2, kAvx512 };

Isa PickIsa(const MatmulOptions& options) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  const KernelIsa active = ActiveKernelIsa();  // the host's widest under TANDEM_ISA
  if (options.force_portable || active == KernelIsa::kPortable) return Isa::kPortable;
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (options.allow_avx512 && active == KernelIsa::kAvx512) return Isa::kAvx512;
#endif
  return Isa::kAvx2;
#else
  (void)options;
  return Isa::kPortable;
#endif
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)
// Whether the FP8 GEMV takes the direct decode (matmul.h, Fp8Decode).
bool UseDirectFp8(const MatmulOptions& options) {
  if (options.fp8_decode != Fp8Decode::kAuto) return options.fp8_decode == Fp8Decode::kDirect;
  return avx2::SubnormalFmaIsFast();
}

// One ISA's GEMV kernels, the activation order its INT4 kernel reads and the pre-scale its FP8
// kernel's activations take.
struct GemvKernels {
  void (*bf16)(const PackedWeight&, const float*, int64_t, float*, int64_t, int64_t);
  void (*fp8)(const PackedWeight&, const float*, int64_t, float*, int64_t, int64_t);
  void (*int4)(const PackedWeight&, const QuantizedActivations&, float*, int64_t, int64_t);
  ActivationOrder int4_order;
  float fp8_prescale;
};

GemvKernels KernelsFor(Isa isa, const MatmulOptions& options) {
  const bool direct = UseDirectFp8(options);
  const float prescale = direct ? avx2::kFp8DirectPrescale : avx2::kFp8ActivationPrescale;
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (isa == Isa::kAvx512)
    return {avx512::GemvBf16, direct ? avx512::GemvFp8Direct : avx512::GemvFp8, avx512::GemvInt4,
            ActivationOrder::kPairs, prescale};
#endif
  (void)isa;
  return {avx2::GemvBf16, direct ? avx2::GemvFp8Direct : avx2::GemvFp8, avx2::GemvInt4,
          ActivationOrder::kNatural, prescale};
}
#endif

// Where element k of an activation row lands in QuantizedActivations::q16 / q8 (see ActivationOrder).
int64_t QuantizedPosition(int64_t k, ActivationOrder order) {
  if (order == ActivationOrder::kNatural) return k;
  const int64_t g = k / kInt4GroupSize, e = k % kInt4GroupSize;
  return (g / 2) * 64 + (e / 16) * 32 + (g % 2) * 16 + e % 16;
}

// One weight row decoded to fp32 (the portable path's inner step).
void DecodeRow(const PackedWeight& w, int64_t n, float* out) {
  const int64_t k_total = w.cols();
  switch (w.format()) {
    case WeightFormat::kBf16: {
      const uint16_t* row = w.bf16() + n * k_total;
      for (int64_t k = 0; k < k_total; ++k) out[k] = Bf16ToFloat(row[k]);
      break;
    }
    case WeightFormat::kFp8Block128: {
      const uint8_t* row = w.fp8() + n * k_total;
      const float* scale = w.scale() + (n / kFp8BlockSize) * Fp8ScaleCols(k_total);
      for (int64_t k = 0; k < k_total; ++k) out[k] = Fp8E4M3ToFloat(row[k]) * scale[k / kFp8BlockSize];
      break;
    }
    case WeightFormat::kInt4Group32: {
      const int64_t groups = w.groups();
      const uint8_t* row = w.int4() + n * groups * 16;
      const uint16_t* scale = w.int4_scale() + n * groups;
      for (int64_t k = 0; k < k_total; ++k) {
        const int64_t g = k / 32, i = k % 32;
        const uint8_t byte = row[g * 16 + i % 16];
        const int q = static_cast<int>(i < 16 ? (byte & 0xf) : (byte >> 4)) - 8;
        out[k] = static_cast<float>(q) * Bf16ToFloat(scale[g]);
      }
      break;
    }
  }
}

}  // namespace

void GemvRowsPortable(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  const int64_t k_total = w.cols(), n_total = w.rows();
  std::vector<float> row(static_cast<size_t>(k_total));
  for (int64_t n = n0; n < n1; ++n) {
    DecodeRow(w, n, row.data());
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k_total;
      float acc = 0.0f;
      for (int64_t k = 0; k < k_total; ++k) acc += row[static_cast<size_t>(k)] * xi[k];
      y[i * n_total + n] = acc;
    }
  }
}

void QuantizeActivations(const float* x, int64_t m, int64_t cols, Int4Activation kind,
                         QuantizedActivations* out, ActivationOrder order) {
  const int64_t groups = (cols + kInt4GroupSize - 1) / kInt4GroupSize;
  const float qmax = kind == Int4Activation::kInt16 ? 32767.0f : 127.0f;
  out->kind = kind;
  out->order = order;
  out->m = m;
  out->groups = groups;
  out->row_elements = (order == ActivationOrder::kPairs ? (groups + 7) / 8 * 8 : groups) * kInt4GroupSize;
  const size_t padded = static_cast<size_t>(m * out->row_elements);
  if (kind == Int4Activation::kInt16) {
    out->q16.assign(padded, 0);
  } else {
    out->q8.assign(padded, 0);
  }
  out->scale.resize(static_cast<size_t>(m * groups));
  out->corr.resize(static_cast<size_t>(m * groups));
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (order == ActivationOrder::kPairs && HostCpuFeatures().HasAvx512Kernels()) {
    for (int64_t i = 0; i < m; ++i) {
      void* q = kind == Int4Activation::kInt16 ? static_cast<void*>(out->q16.data() + i * out->row_elements)
                                               : static_cast<void*>(out->q8.data() + i * out->row_elements);
      avx512::QuantizeRowPairs(x + i * cols, cols, kind, q, out->scale.data() + i * groups,
                               out->corr.data() + i * groups);
    }
    return;
  }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (order == ActivationOrder::kNatural && ActiveKernelIsa() != KernelIsa::kPortable) {
    for (int64_t i = 0; i < m; ++i) {
      void* q = kind == Int4Activation::kInt16 ? static_cast<void*>(out->q16.data() + i * out->row_elements)
                                               : static_cast<void*>(out->q8.data() + i * out->row_elements);
      avx2::QuantizeRowNatural(x + i * cols, cols, kind, q, out->scale.data() + i * groups,
                               out->corr.data() + i * groups);
    }
    return;
  }
#endif
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * kInt4GroupSize, k1 = std::min(cols, k0 + kInt4GroupSize);
      float amax = 0.0f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[i * cols + k]));
      const float scale = amax > 0.0f ? amax / qmax : 1.0f;
      const float inv = 1.0f / scale;
      int32_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const float q = std::clamp(std::nearbyint(x[i * cols + k] * inv), -qmax, qmax);
        const size_t at = static_cast<size_t>(i * out->row_elements + QuantizedPosition(k, order));
        if (kind == Int4Activation::kInt16) {
          out->q16[at] = static_cast<int16_t>(q);
        } else {
          out->q8[at] = static_cast<int8_t>(q);
        }
        sum += static_cast<int32_t>(q);
      }
      out->scale[static_cast<size_t>(i * groups + g)] = scale;
      out->corr[static_cast<size_t>(i * groups + g)] = 8.0f * static_cast<float>(sum) * scale;
    }
  }
}

namespace {

// Bytes of weights one unit of a batch's split stands for: rows are handed to threads by the
// bytes they stream, so a bf16 row counts ~3.5x an int4 row of the same width.
constexpr int64_t kUnitBytes = 64;
constexpr int64_t kUnitGrain = 64;  // 4 KiB of weights: the smallest piece a thread is handed

// A decode-sized task with its activations prepared for its format's kernel.
struct GemvJob {
  const MatmulTask* task = nullptr;
  const float* x = nullptr;                  // bf16 and portable: task->x; fp8: prescaled
  const QuantizedActivations* xq = nullptr;  // int4
  int64_t first_unit = 0;
  int64_t units_per_row = 1;
};

// Activations prepared once for every task that reads the same rows in the same format.
struct PreparedActivations {
  const float* x = nullptr;
  int64_t m = 0, cols = 0;
  WeightFormat format = WeightFormat::kBf16;
  std::vector<float> prescaled;  // fp8
  QuantizedActivations xq;       // int4
};

// Rows [n0, n1) of one job.
void RunGemvRows(Isa isa, const GemvKernels* kernels_or_null, const GemvJob& job, int64_t n0, int64_t n1) {
  const MatmulTask& t = *job.task;
  if (isa == Isa::kPortable) {
    GemvRowsPortable(*t.w, t.x, t.m, t.y, n0, n1);
    return;
  }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  const GemvKernels& kernels = *kernels_or_null;
  switch (t.w->format()) {
    case WeightFormat::kBf16: kernels.bf16(*t.w, job.x, t.m, t.y, n0, n1); break;
    case WeightFormat::kFp8Block128: kernels.fp8(*t.w, job.x, t.m, t.y, n0, n1); break;
    case WeightFormat::kInt4Group32: kernels.int4(*t.w, *job.xq, t.y, n0, n1); break;
  }
#endif
}

// Every task (all with m <= gemv_max_batch) in one ParallelFor over their rows, weighted by bytes.
void RunGemvBatch(std::span<const MatmulTask* const> tasks, Isa isa, ThreadPool* pool,
                  const MatmulOptions& options) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  const GemvKernels kernels = isa == Isa::kPortable ? GemvKernels{} : KernelsFor(isa, options);
  const GemvKernels* kernels_or_null = isa == Isa::kPortable ? nullptr : &kernels;
#else
  const GemvKernels* kernels_or_null = nullptr;
#endif
  std::vector<PreparedActivations> prepared;
  prepared.reserve(tasks.size());  // stable addresses: jobs point into it
  std::vector<GemvJob> jobs(tasks.size());
  int64_t units = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const MatmulTask& t = *tasks[i];
    GemvJob& job = jobs[i];
    job.task = &t;
    job.x = t.x;
    const WeightFormat f = t.w->format();
    if (isa != Isa::kPortable && f != WeightFormat::kBf16) {
      auto same = std::find_if(prepared.begin(), prepared.end(), [&](const PreparedActivations& p) {
        return p.x == t.x && p.m == t.m && p.cols == t.w->cols() && p.format == f;
      });
      if (same == prepared.end()) {
        PreparedActivations& p = prepared.emplace_back();
        p.x = t.x, p.m = t.m, p.cols = t.w->cols(), p.format = f;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
        if (f == WeightFormat::kFp8Block128) {
          p.prescaled.resize(static_cast<size_t>(t.m * t.w->cols()));
          for (size_t k = 0; k < p.prescaled.size(); ++k) p.prescaled[k] = t.x[k] * kernels.fp8_prescale;
        } else {
          QuantizeActivations(t.x, t.m, t.w->cols(), options.int4_activation, &p.xq, kernels.int4_order);
        }
#endif
        same = prepared.end() - 1;
      }
      job.x = same->prescaled.data();
      job.xq = &same->xq;
    }
    job.first_unit = units;
    job.units_per_row =
        std::max<int64_t>(1, t.w->StreamedBytes() / std::max<int64_t>(1, t.w->rows()) / kUnitBytes);
    units += job.units_per_row * t.w->rows();
  }
  // A unit boundary u falls in row ceil((u - first_unit) / units_per_row) of a job, the same row
  // for the chunks on either side: every row runs exactly once.
  pool->ParallelFor(units, kUnitGrain, [&](int64_t u0, int64_t u1, int) {
    for (const GemvJob& job : jobs) {
      const int64_t rows = job.task->w->rows(), upr = job.units_per_row;
      const int64_t n0 = std::clamp<int64_t>((u0 - job.first_unit + upr - 1) / upr, 0, rows);
      const int64_t n1 = std::clamp<int64_t>((u1 - job.first_unit + upr - 1) / upr, 0, rows);
      if (n0 < n1) RunGemvRows(isa, kernels_or_null, job, n0, n1);
    }
  });
}

}  // namespace

void DecodeWeightRow(const PackedWeight& w, int64_t n, float* out, const MatmulOptions& options) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (PickIsa(options) != Isa::kPortable) {
    avx2::DecodeRowChunk(w, n, 0, w.cols(), out);
    return;
  }
#endif
  DecodeRow(w, n, out);
}

const char* MatmulIsa(const MatmulOptions& options) {
  switch (PickIsa(options)) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kPortable: break;
  }
  return "portable";
}

const char* MatmulFp8Decode(const MatmulOptions& options) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (PickIsa(options) != Isa::kPortable) return UseDirectFp8(options) ? "direct" : "half";
#endif
  return "portable";
}

Status Matmul(const PackedWeight& w, const float* x, int64_t m, float* y, ThreadPool* pool,
              const MatmulOptions& options) {
  if (m < 1) return Status::InvalidArgument("matmul: batch m=" + std::to_string(m) + " must be >= 1");
  if (x == nullptr || y == nullptr || pool == nullptr)
    return Status::InvalidArgument("matmul: null argument");
  const int64_t n_total = w.rows();
  const Isa isa = PickIsa(options);
  if (isa == Isa::kPortable) {
    pool->ParallelFor(n_total, kRowGrain,
                      [&](int64_t n0, int64_t n1, int) { GemvRowsPortable(w, x, m, y, n0, n1); });
    return Status::Ok();
  }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (m > options.gemv_max_batch) {
    std::vector<float> packed(
        static_cast<size_t>((m + avx2::kGemmTileM - 1) / avx2::kGemmTileM * avx2::kGemmTileM * w.cols()));
    avx2::PackActivations(x, m, w.cols(), packed.data());
    pool->ParallelFor(n_total, avx2::kGemmRowGrain,
                      [&](int64_t n0, int64_t n1, int) { avx2::GemmRows(w, packed.data(), m, y, n0, n1); });
    return Status::Ok();
  }
  const MatmulTask task{&w, x, m, y};
  const MatmulTask* one = &task;
  RunGemvBatch(std::span<const MatmulTask* const>(&one, 1), isa, pool, options);
#endif
  return Status::Ok();
}

Status MatmulBf16(const PackedWeight& w, const uint16_t* x, int64_t m, float* y, ThreadPool* pool,
                  const MatmulOptions& options) {
  if (m < 1 || x == nullptr) return Status::InvalidArgument("matmul: bad bf16 activations");
  std::vector<float> xf(static_cast<size_t>(m * w.cols()));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = Bf16ToFloat(x[i]);
  return Matmul(w, xf.data(), m, y, pool, options);
}

Status MatmulBatch(std::span<const MatmulTask> tasks, ThreadPool* pool, const MatmulOptions& options) {
  for (size_t t = 0; t < tasks.size(); ++t) {
    const MatmulTask& task = tasks[t];
    if (task.w == nullptr || task.x == nullptr || task.y == nullptr || task.m < 1)
      return Status::InvalidArgument("matmul batch: task " + std::to_string(t) +
                                     " has a null pointer or m < 1");
  }
  if (pool == nullptr) return Status::InvalidArgument("matmul batch: null pool");
  const Isa isa = PickIsa(options);
  std::vector<const MatmulTask*> gemv;
  gemv.reserve(tasks.size());
  for (const MatmulTask& task : tasks) {
    if (isa != Isa::kPortable && task.m > options.gemv_max_batch) {
      RETURN_IF_ERROR(Matmul(*task.w, task.x, task.m, task.y, pool, options));  // GEMM: the whole pool
    } else {
      gemv.push_back(&task);
    }
  }
  if (!gemv.empty()) RunGemvBatch(gemv, isa, pool, options);
  return Status::Ok();
}

}  // namespace tandem::engine::kernels::cpu
