#include "engine/kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/kernels/cuda/int4_matmul_cuda.h"
#include "engine/kernels/cuda/mla_decode_cuda.h"
#include "engine/kernels/cuda/mla_prefill_cuda.h"

namespace tandem::engine::cuda {

namespace {

// A device allocation freed with its owner.
struct DeviceBuffer {
  void* p = nullptr;
  cudaError_t err = cudaSuccess;
  explicit DeviceBuffer(size_t bytes) { err = cudaMalloc(&p, std::max<size_t>(1, bytes)); }
  ~DeviceBuffer() {
    if (p != nullptr) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// Copies `bytes` of host data into a new device buffer.
cudaError_t Upload(const void* host, size_t bytes, std::unique_ptr<DeviceBuffer>* out) {
  *out = std::make_unique<DeviceBuffer>(bytes);
  if ((*out)->err != cudaSuccess) return (*out)->err;
  return bytes == 0 ? cudaSuccess : cudaMemcpy((*out)->p, host, bytes, cudaMemcpyHostToDevice);
}

}  // namespace

struct StagingCudaBackend::DeviceInt4 {
  std::unique_ptr<DeviceBuffer> nibbles, scales;
  Int4DeviceWeight view;
};

StatusOr<std::unique_ptr<StagingCudaBackend>> StagingCudaBackend::Create(ThreadPool* pool) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    return Status::FailedPrecondition(std::string("no usable CUDA device: ") +
                                      (err != cudaSuccess ? cudaGetErrorString(err) : "none found"));
  }
  return std::unique_ptr<StagingCudaBackend>(new StagingCudaBackend(pool));
}

StagingCudaBackend::~StagingCudaBackend() = default;

Status StagingCudaBackend::device_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

bool StagingCudaBackend::Check(int err, const char* what) const {
  if (err == cudaSuccess) return true;
  if (error_.ok()) {
    error_ = Status::Internal(std::string("CUDA ") + what + ": " +
                              cudaGetErrorString(static_cast<cudaError_t>(err)));
  }
  return false;
}

Status StagingCudaBackend::Matmul(const kernels::cpu::PackedWeight& w, const float* x, int64_t m,
                                  float* y) const {
  if (w.format() != WeightFormat::kInt4Group32) return cpu_.Matmul(w, x, m, y);  // no device kernel yet
  if (m < 1) return Status::InvalidArgument("matmul: batch m=" + std::to_string(m) + " must be >= 1");
  if (x == nullptr || y == nullptr) return Status::InvalidArgument("matmul: null argument");
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<DeviceInt4>& dw = weights_[&w];
  if (dw == nullptr) {  // uploaded once, exactly as packed for the CPU kernels
    auto fresh = std::make_shared<DeviceInt4>();
    const size_t cells = static_cast<size_t>(w.rows() * w.groups());
    if (!Check(Upload(w.int4(), cells * 16, &fresh->nibbles), "int4 weight upload") ||
        !Check(Upload(w.int4_scale(), cells * sizeof(uint16_t), &fresh->scales), "int4 scale upload")) {
      weights_.erase(&w);
      return error_;
    }
    fresh->view = {fresh->nibbles->as<uint8_t>(), fresh->scales->as<uint16_t>(), w.rows(), w.cols()};
    dw = std::move(fresh);
  }
  const size_t xs = static_cast<size_t>(m * w.cols()), ys = static_cast<size_t>(m * w.rows());
  std::unique_ptr<DeviceBuffer> d_x;
  DeviceBuffer d_y(ys * sizeof(float));
  if (!Check(Upload(x, xs * sizeof(float), &d_x), "matmul input") || !Check(d_y.err, "matmul output") ||
      !Check(LaunchInt4Matmul(dw->view, d_x->as<float>(), w.cols(), static_cast<int>(m), d_y.as<float>(),
                              w.rows(), nullptr),
             "int4 matmul launch") ||
      !Check(cudaMemcpy(y, d_y.p, ys * sizeof(float), cudaMemcpyDeviceToHost), "int4 matmul")) {
    return error_;
  }
  device_matmuls_.fetch_add(1);
  return Status::Ok();
}

void StagingCudaBackend::MlaDecode(std::span<const kernels::cpu::MlaQuery> queries,
                                   const kernels::cpu::MlaDecodeShape& shape, float* out) const {
  bool device = !queries.empty();
  int64_t max_context = 0;
  for (const kernels::cpu::MlaQuery& q : queries) {
    // The device kernel has no DSA masks and attends to each request's whole context.
    device = device && q.mask == nullptr && q.visible == q.context && q.rows.width == queries[0].rows.width &&
             q.rows.format == queries[0].rows.format;
    max_context = std::max(max_context, q.context);
  }
  if (!device) return cpu_.MlaDecode(queries, shape, out);
  const int batch = static_cast<int>(queries.size()), heads = static_cast<int>(shape.heads);
  const int64_t width = queries[0].rows.width;
  const bool fp8 = queries[0].rows.format == kernels::cpu::RowFormat::kFp8E4M3;
  const int64_t row_bytes = width * (fp8 ? 1 : 2);
  // Each request's rows gathered into one device page of max_context rows (page b for request b).
  std::vector<uint8_t> pages(static_cast<size_t>(batch * max_context * row_bytes));
  std::vector<float> q(static_cast<size_t>(batch * heads * width));
  std::vector<int32_t> table(batch), context(batch);
  for (int b = 0; b < batch; ++b) {
    const kernels::cpu::MlaQuery& query = queries[b];
    for (int64_t t = 0; t < query.context; ++t) {
      std::memcpy(pages.data() + (b * max_context + t) * row_bytes, query.rows.At(t).data,
                  static_cast<size_t>(row_bytes));
    }
    std::copy_n(query.q_cat, heads * width, q.data() + static_cast<size_t>(b) * heads * width);
    table[b] = b;
    context[b] = static_cast<int32_t>(query.context);
  }
  PagedLatent kv;
  kv.page_stride = max_context * row_bytes;
  kv.page_tokens = static_cast<int>(max_context);
  kv.width = static_cast<int>(width);
  kv.fp8 = fp8;
  kv.kv_scale = shape.kv_scale;
  const size_t out_floats = static_cast<size_t>(batch * heads * shape.kv_lora);
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<DeviceBuffer> d_pages, d_q, d_table, d_context;
  DeviceBuffer d_out(out_floats * sizeof(float)),
      d_ws(MlaDecodeWorkspaceBytes(batch, heads, static_cast<int>(shape.kv_lora),
                                   static_cast<int>(max_context)));
  const bool ok =
      Check(Upload(pages.data(), pages.size(), &d_pages), "decode rows") &&
      Check(Upload(q.data(), q.size() * sizeof(float), &d_q), "decode queries") &&
      Check(Upload(table.data(), table.size() * sizeof(int32_t), &d_table), "decode page table") &&
      Check(Upload(context.data(), context.size() * sizeof(int32_t), &d_context), "decode contexts") &&
      Check(d_out.err, "decode output") && Check(d_ws.err, "decode workspace") &&
      [&] {
        kv.pages = d_pages->as<uint8_t>();
        // The CPU shape's score scale carries the pool's scale; the device applies kv_scale itself.
        return Check(LaunchMlaDecode(d_q->as<float>(), batch, heads, d_table->as<int32_t>(), 1,
                                     d_context->as<int32_t>(), static_cast<int>(max_context), kv,
                                     static_cast<int>(shape.kv_lora), shape.score_scale / shape.kv_scale,
                                     d_out.as<float>(), d_ws.p, nullptr),
                     "mla decode launch");
      }() &&
      Check(cudaMemcpy(out, d_out.p, out_floats * sizeof(float), cudaMemcpyDeviceToHost), "mla decode");
  if (!ok) return cpu_.MlaDecode(queries, shape, out);
  device_decodes_.fetch_add(1);
}

void StagingCudaBackend::MlaPrefill(const kernels::cpu::MlaPrefillInput& in,
                                    const kernels::cpu::MlaPrefillShape& shape, float* out) const {
  if (shape.v > kMlaPrefillMaxV || shape.nope + shape.rope > kMlaPrefillMaxQk)
    return cpu_.MlaPrefill(in, shape, out);
  const int64_t ctx = in.context(), heads = shape.heads;
  std::vector<float> k_rope(static_cast<size_t>(ctx * shape.rope));
  for (int64_t j = 0; j < ctx; ++j)
    std::copy_n(in.k_rope + j * in.k_rope_stride, shape.rope, k_rope.data() + j * shape.rope);
  const size_t q_floats = static_cast<size_t>(in.num_new * heads * (shape.nope + shape.rope));
  const size_t kv_floats = static_cast<size_t>(ctx * heads * (shape.nope + shape.v));
  const size_t out_floats = static_cast<size_t>(in.num_new * heads * shape.v);
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<DeviceBuffer> d_q, d_kv, d_rope, d_mask;
  DeviceBuffer d_out(out_floats * sizeof(float));
  const bool ok =
      Check(Upload(in.q, q_floats * sizeof(float), &d_q), "prefill queries") &&
      Check(Upload(in.kv, kv_floats * sizeof(float), &d_kv), "prefill keys and values") &&
      Check(Upload(k_rope.data(), k_rope.size() * sizeof(float), &d_rope), "prefill rotary keys") &&
      Check(Upload(in.mask, in.mask == nullptr ? 0 : static_cast<size_t>(in.num_new * ctx), &d_mask),
            "prefill mask") &&
      Check(d_out.err, "prefill output") &&
      [&] {
        MlaPrefillDeviceInput din;
        din.q = d_q->as<float>();
        din.kv = d_kv->as<float>();
        din.k_rope = d_rope->as<float>();
        din.k_rope_stride = shape.rope;
        din.past = static_cast<int>(in.past);
        din.num_new = static_cast<int>(in.num_new);
        din.mask = in.mask == nullptr ? nullptr : d_mask->as<uint8_t>();
        return Check(LaunchMlaPrefill(din, static_cast<int>(heads), static_cast<int>(shape.nope),
                                      static_cast<int>(shape.rope), static_cast<int>(shape.v), shape.scale,
                                      d_out.as<float>(), nullptr),
                     "mla prefill launch");
      }() &&
      Check(cudaMemcpy(out, d_out.p, out_floats * sizeof(float), cudaMemcpyDeviceToHost), "mla prefill");
  if (!ok) return cpu_.MlaPrefill(in, shape, out);
  device_prefills_.fetch_add(1);
}

}  // namespace tandem::engine::cuda
