#pragma once
// StagingCudaBackend (issue 21 items 1 and 3): a kernels::Backend whose ops that have a CUDA kernel
// run on the device, the rest on the CPU kernels:
//   INT4 Linears          LaunchInt4Matmul (int4_matmul_cuda.h), the weight uploaded once, as packed
//   absorbed MLA decode   LaunchMlaDecode (mla_decode_cuda.h), for queries without a DSA mask that
//                         see their whole context (the split path's MlaDecode; the per-head path's
//                         MlaDecodeHeads stays on the CPU)
//   expanded MLA prefill  LaunchMlaPrefill (mla_prefill_cuda.h)
// Staging: the forward pass's activations and KV pages live on the host (docs/forward-pass.md, "The
// Backend seam"), so each device op copies its inputs in and its output back, and a decode gathers
// the rows it reads from the host pages on every call. It exists to run the whole model through the
// CUDA kernels and hold its logits to the CPU backend's (engine/model/cuda/cuda_forward_test.cc,
// label gpu). It is not a serving path: that needs device-resident activations and pages, and
// device kernels for the ops that fall back here (BF16 / FP8 Linears, norms, vector ops).
//
// Thread safety: ops may be called from several threads; device work is serialized by a mutex.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/status.h"
#include "engine/core/thread_pool.h"
#include "engine/kernels/backend.h"
#include "engine/kernels/cpu/cpu_backend.h"

namespace tandem::engine::cuda {

class StagingCudaBackend final : public kernels::Backend {
 public:
  // FailedPrecondition when the machine has no usable CUDA device. REQUIRES: pool outlives it.
  static StatusOr<std::unique_ptr<StagingCudaBackend>> Create(ThreadPool* pool);
  ~StagingCudaBackend() override;

  const char* name() const override { return "cuda-staging"; }

  // Ops run on the device so far, by kind (tests: the kernels did run).
  int64_t device_matmuls() const { return device_matmuls_.load(); }
  int64_t device_decodes() const { return device_decodes_.load(); }
  int64_t device_prefills() const { return device_prefills_.load(); }
  // The first device error, if any. A Linear that fails on the device returns the error; a decode or
  // prefill core that fails there is computed on the CPU instead (its output is still right).
  Status device_status() const;

  Status Matmul(const kernels::cpu::PackedWeight& w, const float* x, int64_t m, float* y) const override;
  void MatmulF32(const float* w, int64_t n, int64_t k, const float* x, int64_t m, float* y) const override {
    cpu_.MatmulF32(w, n, k, x, m, y);
  }
  void MoeRoute(const kernels::cpu::MoeRouting& r, const float* logits, int64_t tokens, const float* bias,
                int32_t* experts, float* gates) const override {
    cpu_.MoeRoute(r, logits, tokens, bias, experts, gates);
  }
  void DecodeWeightRow(const kernels::cpu::PackedWeight& w, int64_t row, float* out) const override {
    cpu_.DecodeWeightRow(w, row, out);
  }
  void GatherRows(const float* table, int64_t dim, const int32_t* ids, int64_t n, float* out) const override {
    cpu_.GatherRows(table, dim, ids, n, out);
  }
  void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight,
                   double eps) const override {
    cpu_.RmsNormRows(x, rows, dim, stride, weight, eps);
  }
  void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                     double eps) const override {
    cpu_.LayerNormRows(x, rows, dim, weight, bias, eps);
  }
  void SiluMul(float* gate, const float* up, int64_t n) const override { cpu_.SiluMul(gate, up, n); }
  void RopeRows(const kernels::cpu::RopeTable& rope, float* x, int64_t rows, int64_t row_stride,
                int64_t count, int64_t stride, const int64_t* positions) const override {
    cpu_.RopeRows(rope, x, rows, row_stride, count, stride, positions);
  }
  void AddScaled(float a, const float* x, float* y, int64_t n) const override { cpu_.AddScaled(a, x, y, n); }
  float Dot(const float* a, const float* b, int64_t n) const override { return cpu_.Dot(a, b, n); }
  void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                      float* out) const override {
    cpu_.WeightedRowSum(w, rows, n, stride, dim, out);
  }
  void AttentionScores(const float* q, int64_t nq, int64_t q_stride, kernels::cpu::RowsRef rows, int64_t n,
                       int64_t width, float* out, int64_t out_stride) const override {
    cpu_.AttentionScores(q, nq, q_stride, rows, n, width, out, out_stride);
  }
  void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, kernels::cpu::RowsRef rows,
                             int64_t n, int64_t dim, float* out, int64_t out_stride) const override {
    cpu_.AttentionWeightedSums(w, nw, w_stride, rows, n, dim, out, out_stride);
  }
  void RowsToF32(kernels::cpu::RowsRef rows, int64_t n, int64_t width, float scale,
                 float* out) const override {
    cpu_.RowsToF32(rows, n, width, scale, out);
  }
  void MlaDecode(std::span<const kernels::cpu::MlaQuery> queries, const kernels::cpu::MlaDecodeShape& shape,
                 float* out) const override;
  void MlaDecodeHeads(const kernels::cpu::MlaQuery& query, int64_t nh,
                      const kernels::cpu::MlaDecodeShape& shape, float* out) const override {
    cpu_.MlaDecodeHeads(query, nh, shape, out);
  }
  void MlaPrefill(const kernels::cpu::MlaPrefillInput& in, const kernels::cpu::MlaPrefillShape& shape,
                  float* out) const override;

 private:
  struct DeviceInt4;
  explicit StagingCudaBackend(ThreadPool* pool) : cpu_(pool) {}
  // Records the first device error; true when `err` (a cudaError_t) is success.
  bool Check(int err, const char* what) const;

  kernels::cpu::CpuBackend cpu_;
  mutable std::mutex mu_;
  // shared_ptr: DeviceInt4 is complete only in the .cc
  mutable std::unordered_map<const kernels::cpu::PackedWeight*, std::shared_ptr<DeviceInt4>> weights_;
  mutable Status error_ = Status::Ok();
  mutable std::atomic<int64_t> device_matmuls_{0}, device_decodes_{0}, device_prefills_{0};
};

}  // namespace tandem::engine::cuda
