#include "engine/model/loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/formats/weights.h"
#include "engine/io/checkpoint.h"
#include "engine/io/safetensors_dtype.h"

namespace tandem::engine::model {
namespace {

using io::TensorView;

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One tensor to pack: its sources (checkpoint views) and its destination in the skeleton.
struct Job {
  const TensorSpec* spec = nullptr;
  WeightFormat format = WeightFormat::kBf16;  // Linear only
  const TensorView* data = nullptr;           // weight / weight_packed / the fp32 tensor
  const TensorView* scale = nullptr;          // weight_scale_inv (fp8) / weight_scale (int4)
  PackedWeight* linear = nullptr;
  FloatBuffer* floats = nullptr;
  int64_t source_bytes() const {
    return static_cast<int64_t>(data->data.size() + (scale ? scale->data.size() : 0));
  }
};

class Planner {
 public:
  Planner(const ModelConfig& config, const TensorLookup& lookup) : config_(config), lookup_(lookup) {}

  void Plan(const TensorSpec& spec, ModelWeights* w, std::vector<Job>* jobs) {
    Job job;
    job.spec = &spec;
    const bool ok = spec.linear ? PlanLinear(spec, &job) : PlanFloat(spec, &job);
    if (!ok) return;
    job.linear = LinearSlot(w, spec);
    job.floats = FloatSlot(w, spec);
    jobs->push_back(job);
  }

  Status Result() const {
    if (errors_.empty()) return Status::Ok();
    std::string msg = std::to_string(errors_.size()) + " checkpoint tensor problem(s): ";
    for (size_t i = 0; i < errors_.size() && i < 20; ++i) msg += (i ? "; " : "") + errors_[i].message();
    if (errors_.size() > 20) msg += "; and " + std::to_string(errors_.size() - 20) + " more";
    return Status(errors_.front().code(), msg);
  }
  int64_t format_mismatches() const { return mismatches_; }
  const std::string& first_mismatch() const { return first_mismatch_; }

 private:
  void Missing(const std::string& name, const std::vector<int64_t>& shape) {
    errors_.push_back(
        Status::NotFound("missing tensor '" + name + "' (expected " + ShapeString(shape) + ")"));
  }
  bool Check(const TensorView& t, std::initializer_list<DType> dtypes, const std::vector<int64_t>& shape) {
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype) == dtypes.end()) {
      std::string want;
      for (DType d : dtypes) want += (want.empty() ? "" : "/") + std::string(io::SafetensorsDTypeName(d));
      errors_.push_back(Status::InvalidArgument("tensor '" + t.name + "': dtype " +
                                                std::string(io::SafetensorsDTypeName(t.dtype)) +
                                                ", expected " + want));
      return false;
    }
    if (t.shape != shape) {
      errors_.push_back(Status::InvalidArgument("tensor '" + t.name + "': shape " + ShapeString(t.shape) +
                                                ", expected " + ShapeString(shape)));
      return false;
    }
    return true;
  }

  bool PlanFloat(const TensorSpec& spec, Job* job) {
    job->data = lookup_(spec.name);
    if (job->data == nullptr) {
      Missing(spec.name, spec.shape);
      return false;
    }
    return Check(*job->data, {DType::kBF16, DType::kF16, DType::kF32}, spec.shape);
  }

  bool PlanLinear(const TensorSpec& spec, Job* job) {
    const int64_t n = spec.shape[0], k = spec.shape[1];
    const std::string module(spec.module());
    if (const TensorView* packed = lookup_(module + ".weight_packed"); packed != nullptr) {
      job->format = WeightFormat::kInt4Group32;
      job->data = packed;
      job->scale = lookup_(module + ".weight_scale");
      bool ok = Check(*packed, {DType::kI32}, {n, Int4PackedCols(k)});
      if (job->scale == nullptr) {
        Missing(module + ".weight_scale", {n, Int4ScaleCols(k)});
        ok = false;
      } else {
        ok = Check(*job->scale, {DType::kBF16}, {n, Int4ScaleCols(k)}) && ok;
      }
      if (const TensorView* shape = lookup_(module + ".weight_shape"); shape != nullptr && ok) {
        ok = Check(*shape, {DType::kI64, DType::kI32}, {2}) && CheckShapeValues(*shape, n, k);
      }
      if (ok && k % kInt4GroupSize != 0) {
        errors_.push_back(Status::InvalidArgument("tensor '" + packed->name + "': K = " + std::to_string(k) +
                                                  " is not a multiple of the int4 group size 32"));
        ok = false;
      }
      return ok && NoteFormat(module, job->format);
    }
    job->data = lookup_(spec.name);
    if (job->data == nullptr) {
      Missing(spec.name, spec.shape);
      return false;
    }
    if (job->data->dtype != DType::kF8E4M3) {
      job->format = WeightFormat::kBf16;
      return Check(*job->data, {DType::kBF16, DType::kF16, DType::kF32, DType::kF8E4M3}, spec.shape) &&
             NoteFormat(module, job->format);
    }
    job->format = WeightFormat::kFp8Block128;
    bool ok = Check(*job->data, {DType::kF8E4M3}, spec.shape);
    const std::vector<int64_t> scale_shape = {Fp8ScaleRows(n), Fp8ScaleCols(k)};
    job->scale = lookup_(spec.name + "_scale_inv");
    if (job->scale == nullptr) {
      Missing(spec.name + "_scale_inv", scale_shape);
      return false;
    }
    return Check(*job->scale, {DType::kF32}, scale_shape) && ok && NoteFormat(module, job->format);
  }

  bool CheckShapeValues(const TensorView& t, int64_t n, int64_t k) {
    int64_t v[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      if (t.dtype == DType::kI64) {
        std::memcpy(&v[i], t.data.data() + 8 * i, 8);
      } else {
        int32_t x;
        std::memcpy(&x, t.data.data() + 4 * i, 4);
        v[i] = x;
      }
    }
    if (v[0] == n && v[1] == k) return true;
    errors_.push_back(Status::InvalidArgument("tensor '" + t.name + "': values [" + std::to_string(v[0]) +
                                              ", " + std::to_string(v[1]) + "], expected [" +
                                              std::to_string(n) + ", " + std::to_string(k) + "]"));
    return false;
  }

  bool NoteFormat(const std::string& module, WeightFormat stored) {
    const WeightFormat expected = config_.quantization.FormatFor(module);
    if (stored == expected) return true;
    if (mismatches_++ == 0) {
      first_mismatch_ = "'" + module + "' is " + std::string(WeightFormatName(stored)) +
                        " in the checkpoint but quantization_config says " +
                        std::string(WeightFormatName(expected));
    }
    return true;
  }

  const ModelConfig& config_;
  const TensorLookup& lookup_;
  std::vector<Status> errors_;
  int64_t mismatches_ = 0;
  std::string first_mismatch_;
};

// `t`'s bytes as a T array: in place when aligned, else copied into `tmp`.
template <typename T>
const T* Aligned(const TensorView& t, std::vector<T>* tmp) {
  const std::byte* p = t.data.data();
  if (reinterpret_cast<uintptr_t>(p) % alignof(T) == 0) return reinterpret_cast<const T*>(p);
  tmp->resize(t.data.size() / sizeof(T));
  std::memcpy(tmp->data(), p, tmp->size() * sizeof(T));
  return tmp->data();
}

void ToFloat(const TensorView& t, float* out) {
  const size_t n = static_cast<size_t>(t.num_elements());
  const std::byte* p = t.data.data();
  if (t.dtype == DType::kF32) {
    std::memcpy(out, p, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, p + 2 * i, 2);
    out[i] = t.dtype == DType::kBF16 ? Bf16ToFloat(bits) : Fp16ToFloat(bits);
  }
}

Status RunJob(const Job& job) {
  if (job.floats != nullptr) {
    *job.floats = FloatBuffer(static_cast<size_t>(job.data->num_elements()));
    ToFloat(*job.data, job.floats->data());
    return Status::Ok();
  }
  const int64_t n = job.spec->shape[0], k = job.spec->shape[1];
  StatusOr<PackedWeight> packed = Status::Internal("unpacked");
  if (job.format == WeightFormat::kInt4Group32) {
    std::vector<int32_t> tmp_packed;
    std::vector<uint16_t> tmp_scale;
    packed = PackedWeight::FromInt4(
        {Aligned<int32_t>(*job.data, &tmp_packed), Aligned<uint16_t>(*job.scale, &tmp_scale), n, k});
  } else if (job.format == WeightFormat::kFp8Block128) {
    std::vector<float> tmp_scale;
    packed = PackedWeight::FromFp8({reinterpret_cast<const uint8_t*>(job.data->data.data()),
                                    Aligned<float>(*job.scale, &tmp_scale), n, k});
  } else if (job.data->dtype == DType::kBF16) {
    std::vector<uint16_t> tmp;
    packed = PackedWeight::FromBf16({Aligned<uint16_t>(*job.data, &tmp), n, k});
  } else {  // F16 / F32: round to bf16
    std::vector<float> f(static_cast<size_t>(n * k));
    ToFloat(*job.data, f.data());
    std::vector<uint16_t> bf(f.size());
    for (size_t i = 0; i < f.size(); ++i) bf[i] = FloatToBf16(f[i]);
    packed = PackedWeight::FromBf16({bf.data(), n, k});
  }
  if (!packed.ok()) return packed.status().WithContext("packing '" + job.spec->name + "'");
  *job.linear = std::move(packed).value();
  return Status::Ok();
}

int ThreadCount(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

Status RunJobs(const std::vector<Job>& jobs, const LoadOptions& options) {
  LoadProgressFn progress = options.on_progress;
  if (!progress && options.progress_bar) progress = StderrProgressBar();
  LoadProgress p;
  p.tensors_total = static_cast<int64_t>(jobs.size());
  for (const Job& j : jobs) p.bytes_total += j.source_bytes();
  const auto start = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first_error;
  ThreadPool pool(ThreadCount(options.threads));
  // Workers pull tensors from a shared counter: sizes differ by 1000x (norms vs experts).
  pool.ParallelFor(pool.num_threads(), 1, [&](int64_t, int64_t, int) {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Status s = RunJob(jobs[i]);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && first_error.ok()) first_error = s;
      ++p.tensors_done;
      p.bytes_done += jobs[i].source_bytes();
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (progress) progress(p);
    }
  });
  return first_error;
}

}  // namespace

StatusOr<ModelWeights> AssembleModel(const ModelConfig& config, const TensorLookup& lookup,
                                     const LoadOptions& options) {
  const std::vector<TensorSpec> specs = TensorSpecs(config);
  ModelWeights w = MakeSkeleton(config);
  Planner planner(config, lookup);
  std::vector<Job> jobs;
  jobs.reserve(specs.size());
  for (const TensorSpec& spec : specs) planner.Plan(spec, &w, &jobs);
  RETURN_IF_ERROR(planner.Result());
  if (planner.format_mismatches() > 0) {
    const std::string msg =
        std::to_string(planner.format_mismatches()) +
        " Linear weight(s) stored in another format than quantization_config says, e.g. " +
        planner.first_mismatch();
    if (options.strict_formats) return Status::InvalidArgument(msg);
    TANDEM_LOG(Warning) << msg << " (loading what the checkpoint holds)";
  }
  RETURN_IF_ERROR(RunJobs(jobs, options));
  if (config.tie_word_embeddings) {
    std::vector<uint16_t> bf(w.embed_tokens.size());
    for (size_t i = 0; i < bf.size(); ++i) bf[i] = FloatToBf16(w.embed_tokens[i]);
    ASSIGN_OR_RETURN(w.lm_head, PackedWeight::FromBf16({bf.data(), config.vocab_size, config.hidden_size}));
  }
  return w;
}

StatusOr<ModelWeights> LoadModel(const std::string& dir, const LoadOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  ASSIGN_OR_RETURN(io::Checkpoint ckpt, io::Checkpoint::Open(dir));
  StatusOr<ModelWeights> w = AssembleModel(
      config, [&](std::string_view name) { return ckpt.Find(name); }, options);
  if (!w.ok()) return w.status().WithContext(dir);
  return w;
}

}  // namespace tandem::engine::model
