#include "engine/io/quantize_checkpoint.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <span>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/formats/quantization_json.h"
#include "engine/formats/weights.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_writer.h"
#include "engine/io/safetensors_dtype.h"
#include "engine/io/strict_json.h"

namespace tandem::engine::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kConfigName = "config.json";
constexpr std::string_view kWeightSuffix = ".weight";
constexpr std::string_view kScaleInvSuffix = "_scale_inv";  // "x.weight" -> "x.weight_scale_inv"

// One weight to quantize and, once a worker has run it, its outputs.
struct Job {
  const TensorView* weight = nullptr;
  const TensorView* scale_inv = nullptr;  // an FP8 source's [ceil(N/128), ceil(K/128)] f32
  int64_t rows = 0, cols = 0;             // N, K
  std::vector<int32_t> packed;            // int4: [N, K/8]
  std::vector<uint16_t> scale;            // int4: [N, K/32] bf16
  std::array<int64_t, 2> shape{};         // int4: weight_shape
  std::vector<uint8_t> fp8;               // fp8: [N, K] e4m3
  std::vector<float> fp8_scale_inv;       // fp8: [ceil(N/128), ceil(K/128)]
  double relative_error = 0;
};

std::string_view Prefix(std::string_view weight_name) {
  return weight_name.substr(0, weight_name.size() - kWeightSuffix.size());
}

bool ConsumePrefix(std::string_view* s, std::string_view p) {
  if (!s->starts_with(p)) return false;
  s->remove_prefix(p.size());
  return true;
}

bool ConsumeDigits(std::string_view* s) {
  size_t n = 0;
  while (n < s->size() && (*s)[n] >= '0' && (*s)[n] <= '9') ++n;
  s->remove_prefix(n);
  return n > 0;
}

// model.layers.<L>.mlp.experts.<E>.(gate_proj|up_proj|down_proj).weight
bool IsRoutedExpertWeight(std::string_view name) {
  std::string_view s = name;
  if (!ConsumePrefix(&s, "model.layers.") || !ConsumeDigits(&s) || !ConsumePrefix(&s, ".mlp.experts.") ||
      !ConsumeDigits(&s) || !ConsumePrefix(&s, ".")) {
    return false;
  }
  return s == "gate_proj.weight" || s == "up_proj.weight" || s == "down_proj.weight";
}

// A 2-D `*.weight` of an nn.Linear: not an embedding, and not the MoE router gate (a custom module).
bool IsLinearWeight(const TensorView& t) {
  const std::string_view name = t.name;
  return t.shape.size() == 2 && name.ends_with(kWeightSuffix) && name.find("embed_tokens") == name.npos &&
         !name.ends_with(".mlp.gate.weight");
}

// The Linear weights --to fp8 converts: all but the output heads (lm_head, MTP's shared_head).
bool IsFp8TargetWeight(const TensorView& t) {
  const std::string_view name = t.name;
  return IsLinearWeight(t) && name != "lm_head.weight" && !name.ends_with("shared_head.head.weight");
}

StatusOr<json> ReadConfig(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Status::NotFound(path + ": no such file (not a checkpoint?)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Internal(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<json> config = ParseStrictJson(text.str());
  if (!config.ok()) return config.status().WithContext(path + ": malformed");
  if (!config->is_object()) return Status::DataLoss(path + ": malformed: not a JSON object");
  return config;
}

// "fp8" for a DeepSeek-style FP8 checkpoint, "" for an unquantized one; other methods are refused.
StatusOr<bool> IsFp8Config(const json& config) {
  const auto qc = config.find("quantization_config");
  if (qc == config.end() || qc->is_null()) return false;
  const auto method = qc->find("quant_method");
  if (!qc->is_object() || method == qc->end() || !method->is_string()) {
    return Status::DataLoss("config.json: quantization_config has no quant_method string");
  }
  const std::string m = method->get<std::string>();
  if (m != "fp8") {
    return Status::FailedPrecondition("config.json: input is already quantized with quant_method '" + m +
                                      "' (only bf16/f16/f32 or fp8 block-128 inputs are supported)");
  }
  const auto block = qc->find("weight_block_size");
  if (block != qc->end() && *block != json::array({kFp8BlockSize, kFp8BlockSize})) {
    return Status::InvalidArgument("config.json: fp8 weight_block_size " + block->dump() +
                                   " is not [128, 128]");
  }
  return true;
}

Status CheckDirectories(const QuantizeOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(options.input_dir, ec)) {
    return Status::NotFound("input directory " + options.input_dir + " does not exist");
  }
  if (!fs::exists(options.output_dir, ec)) return Status::Ok();
  if (fs::equivalent(options.input_dir, options.output_dir, ec)) {
    return Status::InvalidArgument("output directory " + options.output_dir + " is the input directory");
  }
  if (!fs::is_directory(options.output_dir, ec)) {
    return Status::InvalidArgument("output " + options.output_dir + " exists and is not a directory");
  }
  if (!fs::is_empty(options.output_dir, ec)) {
    return Status::FailedPrecondition("output directory " + options.output_dir +
                                      " is not empty (remove it or choose another)");
  }
  return Status::Ok();
}

// Checks a weight chosen for quantization and fills its job. FP8 sources need their scale_inv.
Status PlanJob(const Checkpoint& ckpt, const TensorView& t, QuantizeTarget target, Job* job) {
  const auto where = [&] { return "tensor '" + t.name + "'"; };
  if (t.shape.size() != 2 || t.shape[0] < 1 || t.shape[1] < 1) {
    return Status::InvalidArgument(where() + ": a Linear weight must be 2-D and non-empty");
  }
  job->weight = &t;
  job->rows = t.shape[0];
  job->cols = t.shape[1];
  if (t.dtype == DType::kF8E4M3) {
    const std::string scale_name = t.name + std::string(kScaleInvSuffix);
    job->scale_inv = ckpt.Find(scale_name);
    if (job->scale_inv == nullptr)
      return Status::InvalidArgument(where() + ": F8_E4M3 without " + scale_name);
    const TensorView& s = *job->scale_inv;
    if (s.dtype != DType::kF32 || s.shape.size() != 2 ||
        !ValidateFp8Shapes(job->rows, job->cols, s.shape[0], s.shape[1]).ok()) {
      return Status::InvalidArgument(where() + ": inconsistent FP8 scale " + scale_name + " (want F32 [" +
                                     std::to_string(Fp8ScaleRows(job->rows)) + ", " +
                                     std::to_string(Fp8ScaleCols(job->cols)) + "])");
    }
  } else if (t.dtype != DType::kBF16 && t.dtype != DType::kF16 && t.dtype != DType::kF32) {
    return Status::InvalidArgument(where() + ": unsupported dtype " +
                                   std::string(SafetensorsDTypeName(t.dtype)) +
                                   " (want BF16, F16, F32 or F8_E4M3)");
  }
  if (target == QuantizeTarget::kInt4 && job->cols % kInt4GroupSize != 0) {
    return Status::InvalidArgument(where() + ": input dimension K = " + std::to_string(job->cols) +
                                   " is not a multiple of the INT4 group size 32");
  }
  return Status::Ok();
}

// The source weight in fp32. REQUIRES: the job was planned (dtype and scale shapes checked).
std::vector<float> LoadFloat(const Job& job) {
  const TensorView& t = *job.weight;
  const size_t n = static_cast<size_t>(job.rows * job.cols);
  std::vector<float> w(n);
  const std::byte* p = t.data.data();
  if (t.dtype == DType::kF32) {
    std::memcpy(w.data(), p, n * sizeof(float));
  } else if (t.dtype == DType::kF8E4M3) {
    std::vector<float> scale(static_cast<size_t>(job.scale_inv->num_elements()));
    std::memcpy(scale.data(), job.scale_inv->data.data(), scale.size() * sizeof(float));
    DequantizeFp8Block128Ref({reinterpret_cast<const uint8_t*>(p), scale.data(), job.rows, job.cols},
                             w.data());
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * i, 2);
      w[i] = t.dtype == DType::kBF16 ? Bf16ToFloat(bits) : Fp16ToFloat(bits);
    }
  }
  return w;
}

double RelativeError(const std::vector<float>& w, const std::vector<float>& back) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double d = static_cast<double>(w[i]) - back[i];
    err2 += d * d;
    ref2 += static_cast<double>(w[i]) * w[i];
  }
  return ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0;
}

void RunJob(QuantizeTarget target, Job* job) {
  const std::vector<float> w = LoadFloat(*job);
  std::vector<float> back(w.size());
  const int64_t n = job->rows, k = job->cols;
  if (target == QuantizeTarget::kInt4) {
    job->packed.resize(static_cast<size_t>(n * Int4PackedCols(k)));
    job->scale.resize(static_cast<size_t>(n * Int4ScaleCols(k)));
    job->shape = {n, k};
    QuantizeInt4Group32Ref(w.data(), n, k, job->packed.data(), job->scale.data());
    DequantizeInt4Group32Ref({job->packed.data(), job->scale.data(), n, k}, back.data());
  } else {
    job->fp8.resize(w.size());
    job->fp8_scale_inv.resize(static_cast<size_t>(Fp8ScaleRows(n) * Fp8ScaleCols(k)));
    QuantizeFp8Block128Ref(w.data(), n, k, job->fp8.data(), job->fp8_scale_inv.data());
    DequantizeFp8Block128Ref({job->fp8.data(), job->fp8_scale_inv.data(), n, k}, back.data());
  }
  job->relative_error = RelativeError(w, back);
}

// Workers pull jobs from a shared counter, so unequal tensor sizes still balance.
void RunJobs(const QuantizeOptions& options, std::vector<Job>* jobs) {
  ThreadPool pool(options.threads);
  std::atomic<size_t> next{0};
  std::mutex progress_mu;
  size_t done = 0;
  uint64_t bytes_done = 0;
  pool.ParallelFor(pool.num_threads(), 1, [&](int64_t, int64_t, int) {
    for (size_t i = next++; i < jobs->size(); i = next++) {
      RunJob(options.target, &(*jobs)[i]);
      std::lock_guard<std::mutex> lock(progress_mu);
      ++done;
      bytes_done += (*jobs)[i].weight->data.size();
      if (options.on_progress) options.on_progress(done, jobs->size(), bytes_done);
    }
  });
}

template <typename T>
std::span<const std::byte> Bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

void AddOutputs(QuantizeTarget target, const std::vector<std::string>& names, const Job& job,
                std::vector<TensorToWrite>* out) {
  const int64_t n = job.rows, k = job.cols;
  if (target == QuantizeTarget::kInt4) {
    out->push_back({names[0], DType::kI32, {n, Int4PackedCols(k)}, Bytes(job.packed)});
    out->push_back({names[1], DType::kBF16, {n, Int4ScaleCols(k)}, Bytes(job.scale)});
    out->push_back({names[2], DType::kI64, {2}, std::as_bytes(std::span<const int64_t>(job.shape))});
  } else {
    out->push_back({names[0], DType::kF8E4M3, {n, k}, Bytes(job.fp8)});
    out->push_back({names[1], DType::kF32, {Fp8ScaleRows(n), Fp8ScaleCols(k)}, Bytes(job.fp8_scale_inv)});
  }
}

std::vector<std::string> OutputNames(QuantizeTarget target, std::string_view weight_name) {
  const std::string prefix(Prefix(weight_name));
  if (target == QuantizeTarget::kInt4) {
    return {prefix + ".weight_packed", prefix + ".weight_scale", prefix + ".weight_shape"};
  }
  return {std::string(weight_name), prefix + ".weight_scale_inv"};
}

json QuantizationConfig(QuantizeTarget target, const std::vector<std::string>& ignore) {
  if (target == QuantizeTarget::kFp8) return Fp8BlockQuantizationJson();
  return Int4PackQuantizedJson({"Linear"}, ignore);
}

uint64_t ShardBytes(const Checkpoint& ckpt) {
  uint64_t total = 0;
  std::error_code ec;
  for (const SafetensorsFile& shard : ckpt.shards()) total += fs::file_size(shard.path(), ec);
  return total;
}

// Tokenizer files, generation_config.json, modeling code...: every plain file but the weights
// and config.json (written last). Subdirectories are not copied.
Status CopyOtherFiles(const std::string& from, const std::string& to) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec) || name == kConfigName || name == kIndexFileName ||
        name.ends_with(".safetensors")) {
      continue;
    }
    fs::copy_file(e.path(), fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::Internal("copying " + e.path().string() + ": " + ec.message());
  }
  if (ec) return Status::Internal("listing " + from + ": " + ec.message());
  return Status::Ok();
}

Status WriteConfig(const std::string& path, const json& config) {
  std::string text;
  try {
    text = config.dump(2) + "\n";
  } catch (const json::exception& e) {
    return Status::Internal(path + ": cannot serialize config: " + e.what());
  }
  const std::span<const std::byte> piece = std::as_bytes(std::span<const char>(text));
  return WriteFileAtomically(path, std::span<const std::span<const std::byte>>(&piece, 1));
}

}  // namespace

StatusOr<QuantizeTarget> ParseQuantizeTarget(std::string_view name) {
  if (name == "int4") return QuantizeTarget::kInt4;
  if (name == "fp8") return QuantizeTarget::kFp8;
  return Status::InvalidArgument("unknown target '" + std::string(name) + "' (expected int4 or fp8)");
}

StatusOr<QuantizeReport> QuantizeCheckpoint(const QuantizeOptions& options) {
  if (options.threads < 1) return Status::InvalidArgument("threads must be >= 1");
  if (options.max_shard_bytes == 0) return Status::InvalidArgument("max_shard_bytes must be > 0");
  RETURN_IF_ERROR(CheckDirectories(options));
  ASSIGN_OR_RETURN(json config, ReadConfig((fs::path(options.input_dir) / kConfigName).string()));
  ASSIGN_OR_RETURN(bool fp8_input, IsFp8Config(config));
  ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(options.input_dir));

  // Plan serially, so every input error surfaces before any work or any write.
  std::vector<Job> jobs;
  std::vector<const TensorView*> kept;
  std::set<std::string_view> consumed_scales;  // scale_inv of FP8 sources, replaced by the outputs
  for (std::string_view name : ckpt.TensorNames()) {
    const TensorView& t = *ckpt.Find(name);
    fp8_input = fp8_input || t.dtype == DType::kF8E4M3;
    const bool quantize =
        options.target == QuantizeTarget::kInt4 ? IsRoutedExpertWeight(name) : IsFp8TargetWeight(t);
    if (!quantize) {
      kept.push_back(&t);
      continue;
    }
    RETURN_IF_ERROR(PlanJob(ckpt, t, options.target, &jobs.emplace_back()));
    if (jobs.back().scale_inv != nullptr) consumed_scales.insert(jobs.back().scale_inv->name);
  }
  if (fp8_input && options.target == QuantizeTarget::kFp8) {
    return Status::FailedPrecondition(options.input_dir + ": input is already fp8");
  }
  std::erase_if(kept, [&](const TensorView* t) { return consumed_scales.contains(t->name); });

  RunJobs(options, &jobs);

  QuantizeReport report;
  report.input_bytes = ShardBytes(ckpt);
  report.tensors_kept = kept.size();
  std::vector<std::string> ignore;
  std::vector<TensorToWrite> tensors;
  for (const TensorView* t : kept) {
    tensors.push_back({t->name, t->dtype, t->shape, t->data});
    if (IsLinearWeight(*t)) ignore.emplace_back(Prefix(t->name));
  }
  for (const Job& job : jobs) {
    report.errors.push_back({job.weight->name, job.relative_error});
    AddOutputs(options.target, OutputNames(options.target, job.weight->name), job, &tensors);
  }

  std::error_code ec;
  fs::create_directories(options.output_dir, ec);
  if (ec) return Status::Internal("creating " + options.output_dir + ": " + ec.message());
  RETURN_IF_ERROR(CopyOtherFiles(options.input_dir, options.output_dir));
  RETURN_IF_ERROR(WriteCheckpoint(options.output_dir, tensors, options.max_shard_bytes, {{"format", "pt"}}));
  StatusOr<Checkpoint> written = Checkpoint::Open(options.output_dir);
  if (!written.ok()) return written.status().WithContext("reading back the output");
  report.output_bytes = ShardBytes(*written);

  config["quantization_config"] = QuantizationConfig(options.target, ignore);
  RETURN_IF_ERROR(WriteConfig((fs::path(options.output_dir) / kConfigName).string(), config));
  return report;
}

double QuantizeReport::Ratio() const {
  return input_bytes == 0 ? 0.0 : static_cast<double>(output_bytes) / static_cast<double>(input_bytes);
}

double QuantizeReport::MeanError() const {
  if (errors.empty()) return 0.0;
  double sum = 0;
  for (const TensorError& e : errors) sum += e.relative_error;
  return sum / static_cast<double>(errors.size());
}

std::vector<TensorError> QuantizeReport::Worst(size_t n) const {
  std::vector<TensorError> sorted = errors;
  std::stable_sort(sorted.begin(), sorted.end(), [](const TensorError& a, const TensorError& b) {
    return a.relative_error > b.relative_error;
  });
  sorted.resize(std::min(n, sorted.size()));
  return sorted;
}

}  // namespace tandem::engine::io
