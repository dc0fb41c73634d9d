#include "engine/model/dummy_model.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <thread>

#include "common/hash.h"
#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/formats/weights.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checkpoint_writer.h"
#include "engine/model/loader.h"
#include "engine/model/model_stats.h"
#include "engine/model/tensor_specs.h"

namespace tandem::engine::model {
namespace {

// SplitMix64: tiny, fast, and good enough for weights.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return SplitMix64Mix(state_ += kSplitMix64Gamma); }
  // Uniform in [-1, 1).
  float Symmetric() { return static_cast<float>(static_cast<double>(Next() >> 40) / 8388608.0 - 1.0); }

 private:
  uint64_t state_;
};

uint64_t TensorSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h ^ (seed * kSplitMix64Gamma);
}

// Values of `spec` in fp32, already rounded to bf16 (F32 for the router bias).
std::vector<float> Values(const TensorSpec& spec, uint64_t seed) {
  Rng rng(TensorSeed(seed, spec.name));
  std::vector<float> v(static_cast<size_t>(spec.num_elements()));
  float center = 0, half_width = 0;  // U(center - hw, center + hw)
  const float sqrt3 = std::sqrt(3.0f);
  switch (spec.slot) {
    case Slot::kEmbedTokens: half_width = sqrt3; break;
    case Slot::kRouter: half_width = sqrt3 / std::sqrt(static_cast<float>(spec.shape[1])); break;
    case Slot::kRouterBias:
    case Slot::kIndexerKNormBias: half_width = 0.1f; break;
    default:
      if (spec.linear) {
        half_width = sqrt3 / std::sqrt(static_cast<float>(spec.shape[1]));
      } else {  // norm weights
        center = 1.0f;
        half_width = 0.1f;
      }
  }
  for (float& x : v) {
    x = center + half_width * rng.Symmetric();
    if (spec.slot != Slot::kRouterBias) x = Bf16ToFloat(FloatToBf16(x));
  }
  return v;
}

template <typename T>
std::vector<std::byte> ToBytes(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<std::byte> Bf16Bytes(const std::vector<float>& v) {
  std::vector<uint16_t> bf(v.size());
  for (size_t i = 0; i < v.size(); ++i) bf[i] = FloatToBf16(v[i]);
  return ToBytes(bf);
}

WeightScheme SchemeOf(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return WeightScheme::kBf16;
    case WeightFormat::kFp8Block128: return WeightScheme::kFp8;
    case WeightFormat::kInt4Group32: return WeightScheme::kInt4;
  }
  return WeightScheme::kBf16;
}

// The checkpoint tensors of one spec (1 to 3), appended to `out`.
void Generate(const TensorSpec& spec, WeightFormat format, uint64_t seed, std::vector<OwnedTensor>* out) {
  const std::vector<float> v = Values(spec, seed);
  if (!spec.linear) {
    if (spec.slot == Slot::kRouterBias) {
      out->push_back({spec.name, DType::kF32, spec.shape, ToBytes(v)});
    } else {
      out->push_back({spec.name, DType::kBF16, spec.shape, Bf16Bytes(v)});
    }
    return;
  }
  const int64_t n = spec.shape[0], k = spec.shape[1];
  const std::string module(spec.module());
  if (format == WeightFormat::kFp8Block128) {
    std::vector<uint8_t> codes(v.size());
    std::vector<float> scale(static_cast<size_t>(Fp8ScaleRows(n) * Fp8ScaleCols(k)));
    QuantizeFp8Block128Ref(v.data(), n, k, codes.data(), scale.data());
    out->push_back({spec.name, DType::kF8E4M3, spec.shape, ToBytes(codes)});
    out->push_back(
        {spec.name + "_scale_inv", DType::kF32, {Fp8ScaleRows(n), Fp8ScaleCols(k)}, ToBytes(scale)});
  } else if (format == WeightFormat::kInt4Group32) {
    std::vector<int32_t> packed(static_cast<size_t>(n * Int4PackedCols(k)));
    std::vector<uint16_t> scale(static_cast<size_t>(n * Int4ScaleCols(k)));
    QuantizeInt4Group32Ref(v.data(), n, k, packed.data(), scale.data());
    out->push_back({module + ".weight_packed", DType::kI32, {n, Int4PackedCols(k)}, ToBytes(packed)});
    out->push_back({module + ".weight_scale", DType::kBF16, {n, Int4ScaleCols(k)}, ToBytes(scale)});
    out->push_back({module + ".weight_shape", DType::kI64, {2}, ToBytes(std::vector<int64_t>{n, k})});
  } else {
    out->push_back({spec.name, DType::kBF16, spec.shape, Bf16Bytes(v)});
  }
}

int Threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

}  // namespace

ModelConfig WithQuantization(const ModelConfig& config, WeightFormat format) {
  ModelConfig c = config;
  c.quantization = QuantizationConfig{};
  if (format == WeightFormat::kFp8Block128) {
    c.quantization.method = QuantizationConfig::Method::kFp8Block128;
  } else if (format == WeightFormat::kInt4Group32) {
    c.quantization.method = QuantizationConfig::Method::kCompressedInt4;
    c.quantization.targets = {"Linear"};
    c.quantization.excluded = {"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                               "re:.*mlp\\.(gate|up|down)_proj$"};
  }
  return c;
}

StatusOr<std::vector<OwnedTensor>> MakeDummyTensors(const ModelConfig& config, WeightFormat format,
                                                    uint64_t seed, int threads) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  const std::vector<TensorSpec> specs = TensorSpecs(config);
  const WeightScheme scheme = SchemeOf(format);
  for (const TensorSpec& s : specs) {
    if (s.linear && SchemeFormat(scheme, s) == WeightFormat::kInt4Group32 &&
        s.shape[1] % kInt4GroupSize != 0) {
      return Status::InvalidArgument("int4 dummy: '" + s.name + "' has K = " + std::to_string(s.shape[1]) +
                                     ", not a multiple of 32");
    }
  }
  std::vector<std::vector<OwnedTensor>> parts(specs.size());
  std::atomic<size_t> next{0};
  ThreadPool pool(Threads(threads));
  pool.ParallelFor(pool.num_threads(), 1, [&](int64_t, int64_t, int) {
    for (size_t i = next++; i < specs.size(); i = next++) {
      Generate(specs[i], specs[i].linear ? SchemeFormat(scheme, specs[i]) : WeightFormat::kBf16, seed,
               &parts[i]);
    }
  });
  std::vector<OwnedTensor> out;
  for (auto& p : parts) {
    for (auto& t : p) out.push_back(std::move(t));
  }
  return out;
}

StatusOr<ModelWeights> MakeDummyModel(const ModelConfig& config, WeightFormat format, uint64_t seed,
                                      int threads) {
  const ModelConfig c = WithQuantization(config, format);
  ASSIGN_OR_RETURN(std::vector<OwnedTensor> tensors, MakeDummyTensors(c, format, seed, threads));
  std::map<std::string_view, io::TensorView, std::less<>> views;
  for (const OwnedTensor& t : tensors) views[t.name] = io::TensorView{t.name, t.dtype, t.shape, t.data};
  LoadOptions options;
  options.threads = threads;
  options.strict_formats = true;
  return AssembleModel(
      c,
      [&](std::string_view name) -> const io::TensorView* {
        const auto it = views.find(name);
        return it == views.end() ? nullptr : &it->second;
      },
      options);
}

Status WriteDummyCheckpoint(const std::string& dir, const ModelConfig& config, WeightFormat format,
                            uint64_t seed, uint64_t max_shard_bytes, int threads) {
  // config.json has no place for the prefix: the written checkpoint uses plain HF names.
  ModelConfig c = WithQuantization(config, format);
  c.tensor_prefix.clear();
  ASSIGN_OR_RETURN(std::vector<OwnedTensor> tensors, MakeDummyTensors(c, format, seed, threads));
  std::vector<io::TensorToWrite> to_write;
  to_write.reserve(tensors.size());
  for (const OwnedTensor& t : tensors) to_write.push_back({t.name, t.dtype, t.shape, t.data});
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Internal("creating " + dir + ": " + ec.message());
  RETURN_IF_ERROR(io::WriteCheckpoint(dir, to_write, max_shard_bytes, {{"format", "pt"}}));
  const std::string text = ModelConfigToJson(c);
  const std::span<const std::byte> piece = std::as_bytes(std::span<const char>(text));
  return io::WriteFileAtomically((std::filesystem::path(dir) / "config.json").string(),
                                 std::span<const std::span<const std::byte>>(&piece, 1));
}

}  // namespace tandem::engine::model
