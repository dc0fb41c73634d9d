#include "engine/io/quantize_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/formats/float_codecs.h"
#include "engine/formats/weights.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_writer.h"
#include "engine/io/test_util.h"

namespace tandem::engine::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A tiny deepseek_v3-like model: hidden 160 (FP8 blocks of 128 + a partial 32), layer 0 dense,
// layers 1-2 MoE with 4 routed experts of width 64, a shared expert and a router gate.
constexpr int64_t kHidden = 160, kInter = 64, kDenseInter = 96, kVocab = 100, kExperts = 4;

std::map<std::string, std::vector<int64_t>> ModelShapes() {
  std::map<std::string, std::vector<int64_t>> s = {{"model.embed_tokens.weight", {kVocab, kHidden}},
                                                   {"model.norm.weight", {kHidden}},
                                                   {"lm_head.weight", {kVocab, kHidden}}};
  for (int l = 0; l < 3; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s[p + "input_layernorm.weight"] = {kHidden};
    s[p + "post_attention_layernorm.weight"] = {kHidden};
    s[p + "self_attn.q_a_proj.weight"] = {96, kHidden};
    s[p + "self_attn.q_a_layernorm.weight"] = {96};
    s[p + "self_attn.q_b_proj.weight"] = {128, 96};
    s[p + "self_attn.kv_a_proj_with_mqa.weight"] = {80, kHidden};
    s[p + "self_attn.kv_a_layernorm.weight"] = {64};
    s[p + "self_attn.kv_b_proj.weight"] = {128, 64};
    s[p + "self_attn.o_proj.weight"] = {kHidden, 128};
    const auto mlp = [&](const std::string& m, int64_t inter) {
      s[m + "gate_proj.weight"] = {inter, kHidden};
      s[m + "up_proj.weight"] = {inter, kHidden};
      s[m + "down_proj.weight"] = {kHidden, inter};
    };
    if (l == 0) {
      mlp(p + "mlp.", kDenseInter);
      continue;
    }
    for (int e = 0; e < kExperts; ++e) mlp(p + "mlp.experts." + std::to_string(e) + ".", kInter);
    mlp(p + "mlp.shared_experts.", kInter);
    s[p + "mlp.gate.weight"] = {kExperts, kHidden};
  }
  return s;
}

bool IsExpert(const std::string& name) { return name.find(".mlp.experts.") != std::string::npos; }
bool IsFp8Target(const std::string& name, const std::vector<int64_t>& shape) {
  return shape.size() == 2 && name.find("embed_tokens") == name.npos && name != "lm_head.weight" &&
         !name.ends_with("mlp.gate.weight");
}

json BaseConfig() {
  return {{"model_type", "deepseek_v3"}, {"hidden_size", kHidden}, {"n_routed_experts", kExperts}};
}

// Writes a checkpoint of Gaussian BF16 weights (or FP8 block-128 ones) plus config and tokenizer.
class QuantizeCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::FreshDir();
    in_ = root_ + "/in";
    out_ = root_ + "/out";
  }

  void MakeInput(bool fp8, uint64_t max_shard_bytes = 1 << 30, json config = BaseConfig()) {
    std::mt19937 rng(7);
    std::normal_distribution<float> gauss(0.0f, 0.02f);
    for (const auto& [name, shape] : ModelShapes()) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> w(static_cast<size_t>(n));
      for (float& x : w) x = Bf16ToFloat(FloatToBf16(gauss(rng)));
      if (fp8 && IsFp8Target(name, shape)) {
        std::vector<uint8_t> data(w.size());
        std::vector<float> s(static_cast<size_t>(Fp8ScaleRows(shape[0]) * Fp8ScaleCols(shape[1])));
        QuantizeFp8Block128Ref(w.data(), shape[0], shape[1], data.data(), s.data());
        DequantizeFp8Block128Ref({data.data(), s.data(), shape[0], shape[1]}, w.data());
        Add(name, DType::kF8E4M3, shape, data.data(), data.size());
        Add(name + "_scale_inv", DType::kF32, {Fp8ScaleRows(shape[0]), Fp8ScaleCols(shape[1])}, s.data(),
            s.size() * 4);
      } else {
        std::vector<uint16_t> bits(w.size());
        for (size_t i = 0; i < w.size(); ++i) bits[i] = FloatToBf16(w[i]);
        Add(name, DType::kBF16, shape, bits.data(), bits.size() * 2);
      }
      source_[name] = std::move(w);
    }
    if (fp8) {
      config["quantization_config"] = {{"quant_method", "fp8"},
                                       {"fmt", "e4m3"},
                                       {"weight_block_size", {128, 128}},
                                       {"activation_scheme", "dynamic"}};
    }
    WriteInput(max_shard_bytes, config.dump());
  }

  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* p, size_t bytes) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_[name] = std::vector<std::byte>(b, b + bytes);
    dtypes_[name] = dtype;
    shapes_[name] = std::move(shape);
  }

  void WriteInput(uint64_t max_shard_bytes, const std::string& config_text) {
    std::vector<TensorToWrite> tensors;
    for (const auto& [name, b] : bytes_) tensors.push_back({name, dtypes_[name], shapes_[name], b});
    ASSERT_TRUE(WriteCheckpoint(in_, tensors, max_shard_bytes).ok());
    std::ofstream(in_ + "/config.json") << config_text;
    std::ofstream(in_ + "/tokenizer.json") << R"({"version": "1.0"})";
  }

  StatusOr<QuantizeReport> Run(QuantizeTarget target, uint64_t max_shard_bytes = 1 << 30, int threads = 3) {
    QuantizeOptions o{in_, out_, target, max_shard_bytes, threads, nullptr};
    return QuantizeCheckpoint(o);
  }

  json OutputConfig() {
    std::ifstream in(out_ + "/config.json");
    std::stringstream text;
    text << in.rdbuf();
    return json::parse(text.str());
  }

  template <typename T>
  static std::vector<T> Read(const TensorView& t) {
    std::vector<T> v(t.data.size() / sizeof(T));
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  }

  void ExpectKept(const Checkpoint& out, const std::string& name) {
    const TensorView* t = out.Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, dtypes_[name]) << name;
    EXPECT_EQ(t->shape, shapes_[name]) << name;
    ASSERT_EQ(t->data.size(), bytes_[name].size()) << name;
    EXPECT_EQ(std::memcmp(t->data.data(), bytes_[name].data(), t->data.size()), 0) << name;
  }

  // Checks an INT4 expert against the reference quantizer; returns its relative error.
  double ExpectInt4(const Checkpoint& out, const std::string& name) {
    const std::string p = name.substr(0, name.size() - 7);
    const TensorView* packed = out.Find(p + ".weight_packed");
    const TensorView* scale = out.Find(p + ".weight_scale");
    const TensorView* shape = out.Find(p + ".weight_shape");
    EXPECT_EQ(out.Find(name), nullptr) << name;
    if (packed == nullptr || scale == nullptr || shape == nullptr) {
      ADD_FAILURE() << "missing INT4 tensors of " << name;
      return 1;
    }
    const int64_t n = shapes_[name][0], k = shapes_[name][1];
    EXPECT_EQ(packed->dtype, DType::kI32);
    EXPECT_EQ(packed->shape, (std::vector<int64_t>{n, k / 8}));
    EXPECT_EQ(scale->dtype, DType::kBF16);
    EXPECT_EQ(scale->shape, (std::vector<int64_t>{n, k / 32}));
    EXPECT_EQ(shape->dtype, DType::kI64);
    EXPECT_EQ(shape->shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(Read<int64_t>(*shape), (std::vector<int64_t>{n, k}));
    std::vector<int32_t> want_packed(static_cast<size_t>(n * k / 8));
    std::vector<uint16_t> want_scale(static_cast<size_t>(n * k / 32));
    const std::vector<float>& w = source_[name];
    QuantizeInt4Group32Ref(w.data(), n, k, want_packed.data(), want_scale.data());
    EXPECT_EQ(Read<int32_t>(*packed), want_packed) << name;
    EXPECT_EQ(Read<uint16_t>(*scale), want_scale) << name;
    std::vector<float> back(w.size());
    DequantizeInt4Group32Ref({want_packed.data(), want_scale.data(), n, k}, back.data());
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double d = static_cast<double>(w[i]) - back[i];
      err2 += d * d;
      ref2 += static_cast<double>(w[i]) * w[i];
    }
    return std::sqrt(err2 / ref2);
  }

  void ExpectInt4Checkpoint(const QuantizeReport& report) {
    StatusOr<Checkpoint> out = Checkpoint::Open(out_);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    size_t experts = 0;
    for (const auto& [name, b] : bytes_) {
      if (!IsExpert(name)) {
        ExpectKept(*out, name);
        continue;
      }
      if (name.ends_with("_scale_inv")) {  // an FP8 source's scale goes with its weight
        EXPECT_EQ(out->Find(name), nullptr) << name;
        continue;
      }
      const double err = ExpectInt4(*out, name);
      EXPECT_LT(err, 0.1) << name;
      ASSERT_LT(experts, report.errors.size());
      EXPECT_EQ(report.errors[experts].name, name);
      EXPECT_NEAR(report.errors[experts].relative_error, err, 1e-9) << name;
      ++experts;
    }
    EXPECT_EQ(experts, 2u * kExperts * 3);
    EXPECT_EQ(report.errors.size(), experts);
    EXPECT_EQ(out->num_tensors(), report.tensors_kept + 3 * experts);
    ExpectSummary(report);
    EXPECT_TRUE(fs::exists(out_ + "/tokenizer.json"));
    const json qc = OutputConfig()["quantization_config"];
    EXPECT_EQ(OutputConfig()["model_type"], "deepseek_v3");
    EXPECT_EQ(qc["quant_method"], "compressed-tensors");
    EXPECT_EQ(qc["format"], "pack-quantized");
    const json& weights = qc["config_groups"]["group_0"]["weights"];
    EXPECT_EQ(weights["num_bits"], 4);
    EXPECT_EQ(weights["type"], "int");
    EXPECT_EQ(weights["symmetric"], true);
    EXPECT_EQ(weights["strategy"], "group");
    EXPECT_EQ(weights["group_size"], 32);
    EXPECT_EQ(qc["config_groups"]["group_0"]["targets"], json::array({"Linear"}));
    const auto ignore = qc["ignore"].get<std::vector<std::string>>();
    for (const char* m :
         {"lm_head", "model.layers.0.self_attn.o_proj", "model.layers.2.self_attn.kv_a_proj_with_mqa",
          "model.layers.1.mlp.shared_experts.down_proj", "model.layers.0.mlp.gate_proj"}) {
      EXPECT_NE(std::find(ignore.begin(), ignore.end(), m), ignore.end()) << m;
    }
    for (const std::string& m : ignore) {
      EXPECT_FALSE(IsExpert(m)) << m;
      EXPECT_FALSE(m.ends_with("mlp.gate") || m.find("embed") != m.npos || m.find("norm") != m.npos) << m;
    }
  }

  static void ExpectSummary(const QuantizeReport& report) {
    double sum = 0, max = 0;
    for (const TensorError& e : report.errors) {
      sum += e.relative_error;
      max = std::max(max, e.relative_error);
    }
    EXPECT_NEAR(report.MeanError(), sum / report.errors.size(), 1e-12);
    const std::vector<TensorError> worst = report.Worst(5);
    ASSERT_EQ(worst.size(), 5u);
    EXPECT_EQ(worst[0].relative_error, max);
    for (size_t i = 1; i < worst.size(); ++i) EXPECT_GE(worst[i - 1].relative_error, worst[i].relative_error);
    EXPECT_GT(report.input_bytes, report.output_bytes);
    EXPECT_NEAR(report.Ratio(), double(report.output_bytes) / report.input_bytes, 1e-12);
  }

  std::string root_, in_, out_;
  std::map<std::string, std::vector<std::byte>> bytes_;
  std::map<std::string, DType> dtypes_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, std::vector<float>> source_;  // fp32 value of each weight as stored
};

TEST_F(QuantizeCheckpointTest, Int4SingleFile) {
  MakeInput(/*fp8=*/false);
  StatusOr<QuantizeReport> report = Run(QuantizeTarget::kInt4);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectInt4Checkpoint(*report);
  EXPECT_TRUE(fs::exists(out_ + "/model.safetensors"));
  // Gaussian weights: group-32 round-to-nearest gives about 0.095 (scale amax / 7.5, 16 levels).
  EXPECT_GT(report->MeanError(), 0.05);
  EXPECT_LT(report->Worst(1)[0].relative_error, 0.1);
}

TEST_F(QuantizeCheckpointTest, Int4ShardedInAndOut) {
  MakeInput(/*fp8=*/false, /*max_shard_bytes=*/100'000);
  ASSERT_TRUE(fs::exists(in_ + "/model.safetensors.index.json"));
  StatusOr<QuantizeReport> report = Run(QuantizeTarget::kInt4, /*max_shard_bytes=*/60'000, /*threads=*/1);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(fs::exists(out_ + "/model.safetensors.index.json"));
  ExpectInt4Checkpoint(*report);
}

TEST_F(QuantizeCheckpointTest, ThreadCountDoesNotChangeTheOutput) {
  MakeInput(/*fp8=*/false);
  size_t calls = 0, last_done = 0, total = 0;
  QuantizeOptions o{in_, out_, QuantizeTarget::kInt4, 1 << 30, 4, [&](size_t done, size_t all, uint64_t) {
                      ++calls;
                      last_done = done;
                      total = all;
                    }};
  StatusOr<QuantizeReport> a = QuantizeCheckpoint(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(calls, a->errors.size());
  EXPECT_EQ(last_done, total);
  EXPECT_EQ(total, a->errors.size());
  o.output_dir = root_ + "/out1";
  o.threads = 1;
  StatusOr<QuantizeReport> b = QuantizeCheckpoint(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->errors.size(), b->errors.size());
  for (size_t i = 0; i < a->errors.size(); ++i)
    EXPECT_EQ(a->errors[i].relative_error, b->errors[i].relative_error);
  EXPECT_EQ(a->output_bytes, b->output_bytes);
}

TEST_F(QuantizeCheckpointTest, Fp8) {
  MakeInput(/*fp8=*/false);
  StatusOr<QuantizeReport> report = Run(QuantizeTarget::kFp8);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  StatusOr<Checkpoint> out = Checkpoint::Open(out_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  size_t quantized = 0;
  for (const auto& [name, shape] : shapes_) {
    if (!IsFp8Target(name, shape)) {
      ExpectKept(*out, name);
      continue;
    }
    const TensorView* data = out->Find(name);
    const TensorView* scale = out->Find(name + "_scale_inv");
    ASSERT_TRUE(data != nullptr && scale != nullptr) << name;
    EXPECT_EQ(data->dtype, DType::kF8E4M3);
    EXPECT_EQ(data->shape, shape);
    EXPECT_EQ(scale->dtype, DType::kF32);
    EXPECT_EQ(scale->shape, (std::vector<int64_t>{Fp8ScaleRows(shape[0]), Fp8ScaleCols(shape[1])}));
    std::vector<uint8_t> want(source_[name].size());
    std::vector<float> want_scale(static_cast<size_t>(scale->num_elements()));
    QuantizeFp8Block128Ref(source_[name].data(), shape[0], shape[1], want.data(), want_scale.data());
    EXPECT_EQ(Read<uint8_t>(*data), want) << name;
    EXPECT_EQ(Read<float>(*scale), want_scale) << name;
    ASSERT_LT(quantized, report->errors.size());
    EXPECT_EQ(report->errors[quantized].name, name);
    EXPECT_LT(report->errors[quantized++].relative_error, 0.04) << name;
  }
  EXPECT_EQ(quantized, report->errors.size());
  EXPECT_EQ(quantized, 3u * 5 + 3 + 2 * (kExperts + 1) * 3);  // attention, dense MLP, experts + shared
  EXPECT_EQ(out->num_tensors(), report->tensors_kept + 2 * quantized);
  ExpectSummary(*report);
  const json qc = OutputConfig()["quantization_config"];
  EXPECT_EQ(qc, json({{"quant_method", "fp8"},
                      {"fmt", "e4m3"},
                      {"weight_block_size", {128, 128}},
                      {"activation_scheme", "dynamic"}}));
}

TEST_F(QuantizeCheckpointTest, Fp8InputToInt4) {
  MakeInput(/*fp8=*/true, /*max_shard_bytes=*/100'000);
  StatusOr<QuantizeReport> report = Run(QuantizeTarget::kInt4);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectInt4Checkpoint(*report);  // kept FP8 weights and their scales byte-identical too
  StatusOr<Checkpoint> out = Checkpoint::Open(out_);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->Find("model.layers.0.self_attn.o_proj.weight")->dtype, DType::kF8E4M3);
  EXPECT_NE(out->Find("model.layers.1.mlp.shared_experts.up_proj.weight_scale_inv"), nullptr);
}

// ---- errors: each one names its cause and leaves no config.json in the output --------------
class QuantizeErrorTest : public QuantizeCheckpointTest {
 protected:
  void ExpectError(QuantizeTarget target, StatusCode code, const std::string& message_part) {
    StatusOr<QuantizeReport> report = Run(target);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.status().code(), code) << report.status().ToString();
    EXPECT_NE(report.status().message().find(message_part), std::string::npos) << report.status().ToString();
    EXPECT_FALSE(fs::exists(out_ + "/config.json"));
  }
};

TEST_F(QuantizeErrorTest, MissingInput) {
  ExpectError(QuantizeTarget::kInt4, StatusCode::kNotFound, "does not exist");
}

TEST_F(QuantizeErrorTest, MissingConfig) {
  MakeInput(false);
  fs::remove(in_ + "/config.json");
  ExpectError(QuantizeTarget::kInt4, StatusCode::kNotFound, "config.json");
}

TEST_F(QuantizeErrorTest, MalformedConfig) {
  MakeInput(false);
  std::ofstream(in_ + "/config.json", std::ios::trunc) << "{\"model_type\": ";
  ExpectError(QuantizeTarget::kInt4, StatusCode::kDataLoss, "malformed");
  std::ofstream(in_ + "/config.json", std::ios::trunc) << "[1, 2]";
  ExpectError(QuantizeTarget::kFp8, StatusCode::kDataLoss, "not a JSON object");
}

TEST_F(QuantizeErrorTest, UnsupportedDtype) {
  const std::string name = "model.layers.1.mlp.experts.2.up_proj.weight";
  std::vector<double> w(kInter * kHidden, 0.5);
  Add(name, DType::kF64, {kInter, kHidden}, w.data(), w.size() * 8);
  WriteInput(1 << 30, BaseConfig().dump());
  ExpectError(QuantizeTarget::kInt4, StatusCode::kInvalidArgument, name + "': unsupported dtype F64");
}

TEST_F(QuantizeErrorTest, KNotMultipleOf32) {
  const std::string name = "model.layers.1.mlp.experts.0.down_proj.weight";
  std::vector<uint16_t> w(8 * 40, FloatToBf16(0.25f));
  Add(name, DType::kBF16, {8, 40}, w.data(), w.size() * 2);
  WriteInput(1 << 30, BaseConfig().dump());
  ExpectError(QuantizeTarget::kInt4, StatusCode::kInvalidArgument, name + "': input dimension K = 40");
}

TEST_F(QuantizeErrorTest, InconsistentFp8Scale) {
  MakeInput(true);
  const std::string name = "model.layers.2.mlp.experts.3.gate_proj.weight";
  const std::vector<float> scale(4, 1.0f);
  Add(name + "_scale_inv", DType::kF32, {2, 2}, scale.data(), 16);  // want [1, 2]
  json config = BaseConfig();
  config["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  WriteInput(1 << 30, config.dump());
  ExpectError(QuantizeTarget::kInt4, StatusCode::kInvalidArgument, "inconsistent FP8 scale");
}

TEST_F(QuantizeErrorTest, AlreadyFp8) {
  MakeInput(true);
  ExpectError(QuantizeTarget::kFp8, StatusCode::kFailedPrecondition, "already fp8");
}

TEST_F(QuantizeErrorTest, AlreadyCompressedTensors) {
  json config = BaseConfig();
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}};
  MakeInput(false, 1 << 30, config);
  ExpectError(QuantizeTarget::kInt4, StatusCode::kFailedPrecondition, "compressed-tensors");
}

TEST_F(QuantizeErrorTest, OutputIsInput) {
  MakeInput(false);
  out_ = in_ + "/.";
  StatusOr<QuantizeReport> report = Run(QuantizeTarget::kInt4);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(report.status().message().find("is the input directory"), std::string::npos);
  EXPECT_EQ(OutputConfig(), BaseConfig());  // untouched
}

TEST_F(QuantizeErrorTest, OutputNotEmpty) {
  MakeInput(false);
  fs::create_directories(out_);
  std::ofstream(out_ + "/stale.txt") << "x";
  ExpectError(QuantizeTarget::kInt4, StatusCode::kFailedPrecondition, "not empty");
}

}  // namespace
}  // namespace tandem::engine::io
