#include "engine/model/loader.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "engine/formats/float_codecs.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_writer.h"
#include "engine/model/dummy_model.h"
#include "engine/model/presets.h"

namespace tandem::engine::model {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(::testing::TempDir()) /
                 ("engine_model_" + std::string(info->test_suite_name()) + "_" + info->name() + suffix);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

ModelConfig MustPreset(const std::string& name) {
  StatusOr<ModelConfig> c = Preset(name);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

bool SameBytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// Every packed weight and fp32 buffer of `a` and `b` holds the same bytes.
void ExpectSameWeights(const ModelWeights& a, const ModelWeights& b) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  ForEachTensorSpec(a.config, [&](const TensorSpec& s) {
    if (s.linear) {
      const PackedWeight& x = *FindLinear(a, s);
      const PackedWeight& y = *FindLinear(b, s);
      ASSERT_EQ(x.format(), y.format()) << s.name;
      ASSERT_EQ(x.rows(), s.shape[0]) << s.name;
      ASSERT_EQ(x.cols(), s.shape[1]) << s.name;
      ASSERT_EQ(y.rows(), x.rows()) << s.name;
      const size_t nk = static_cast<size_t>(x.rows() * x.cols());
      const size_t g = static_cast<size_t>(x.rows() * x.groups());
      switch (x.format()) {
        case WeightFormat::kBf16: EXPECT_TRUE(SameBytes(x.bf16(), y.bf16(), nk * 2)) << s.name; break;
        case WeightFormat::kFp8Block128: {
          const size_t scales = static_cast<size_t>(Fp8ScaleRows(x.rows()) * Fp8ScaleCols(x.cols()));
          EXPECT_TRUE(SameBytes(x.fp8(), y.fp8(), nk)) << s.name;
          EXPECT_TRUE(SameBytes(x.scale(), y.scale(), scales * 4)) << s.name;
          break;
        }
        case WeightFormat::kInt4Group32:
          EXPECT_TRUE(SameBytes(x.int4(), y.int4(), g * 16)) << s.name;
          EXPECT_TRUE(SameBytes(x.int4_scale(), y.int4_scale(), g * 2)) << s.name;
          break;
      }
    } else {
      const FloatBuffer& x = *FindFloat(a, s);
      const FloatBuffer& y = *FindFloat(b, s);
      ASSERT_EQ(x.size(), static_cast<size_t>(s.num_elements())) << s.name;
      ASSERT_EQ(y.size(), x.size()) << s.name;
      EXPECT_TRUE(SameBytes(x.data(), y.data(), x.size() * 4)) << s.name;
    }
  });
}

TEST(DummyModelTest, SameSeedSameBytesWhateverTheThreads) {
  const ModelConfig c = MustPreset("tiny-glm");
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8Block128, WeightFormat::kInt4Group32}) {
    StatusOr<std::vector<OwnedTensor>> a = MakeDummyTensors(WithQuantization(c, f), f, 7, 1);
    StatusOr<std::vector<OwnedTensor>> b = MakeDummyTensors(WithQuantization(c, f), f, 7, 3);
    StatusOr<std::vector<OwnedTensor>> other = MakeDummyTensors(WithQuantization(c, f), f, 8, 2);
    ASSERT_TRUE(a.ok() && b.ok() && other.ok());
    ASSERT_EQ(a->size(), b->size());
    size_t differing = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].name, (*b)[i].name);
      EXPECT_EQ((*a)[i].data, (*b)[i].data) << (*a)[i].name;
      differing += (*a)[i].data != (*other)[i].data;
    }
    EXPECT_GT(differing, a->size() / 2) << "another seed must give other weights";
  }
}

TEST(DummyModelTest, WeightsAreScaledForUnitActivations) {
  const ModelConfig c = MustPreset("tiny");
  StatusOr<ModelWeights> w = MakeDummyModel(c, WeightFormat::kBf16, 1);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const PackedWeight& kv_a = w->layers[0].attn.kv_a_proj_with_mqa;  // [80, 128]
  double sum2 = 0;
  const int64_t n = kv_a.rows() * kv_a.cols();
  for (int64_t i = 0; i < n; ++i) sum2 += std::pow(Bf16ToFloat(kv_a.bf16()[i]), 2);
  EXPECT_NEAR(std::sqrt(sum2 / n), 1.0 / std::sqrt(128.0), 0.1 / std::sqrt(128.0));
  for (size_t i = 0; i < w->norm.size(); ++i) {
    EXPECT_GE(w->norm[i], 0.89f);
    EXPECT_LE(w->norm[i], 1.11f);
  }
  EXPECT_EQ(w->layers[1].moe.e_score_correction_bias.size(), 8u);
  EXPECT_GT(w->ResidentBytes(), 1'000'000);
}

TEST(DummyModelTest, FormatsFollowTandemQuantize) {
  const ModelConfig c = MustPreset("tiny");
  // tiny: 3 layers (1 dense) -> 3x5 attention + 3 dense + 2x3 shared + 2x8x3 experts + lm_head.
  const int64_t experts = 2 * 8 * 3, others = 15 + 3 + 6 + 1;
  StatusOr<ModelWeights> int4 = MakeDummyModel(c, WeightFormat::kInt4Group32, 1);
  ASSERT_TRUE(int4.ok()) << int4.status().ToString();
  EXPECT_EQ(int4->LinearFormatCounts(), (std::array<int64_t, 3>{others, 0, experts}));
  StatusOr<ModelWeights> fp8 = MakeDummyModel(c, WeightFormat::kFp8Block128, 1);
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  EXPECT_EQ(fp8->LinearFormatCounts(), (std::array<int64_t, 3>{1, experts + others - 1, 0}));
  EXPECT_EQ(fp8->lm_head.format(), WeightFormat::kBf16);
}

class RoundTripTest : public ::testing::TestWithParam<std::tuple<std::string, WeightFormat>> {};

TEST_P(RoundTripTest, WriteLoadCompareBytes) {
  const auto& [preset, format] = GetParam();
  const ModelConfig c = MustPreset(preset);
  const std::string dir = FreshDir(std::to_string(static_cast<int>(format)));
  // Small shards: exercises the index and tensors spread over several files.
  ASSERT_TRUE(WriteDummyCheckpoint(dir, c, format, 42, 400'000).ok());
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model.safetensors.index.json"));
  LoadProgress last;
  int calls = 0;
  LoadOptions options;
  options.threads = 2;
  options.strict_formats = true;
  options.on_progress = [&](const LoadProgress& p) {
    last = p;
    ++calls;
  };
  StatusOr<ModelWeights> loaded = LoadModel(dir, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->config.quantization.method, WithQuantization(c, format).quantization.method);
  EXPECT_EQ(calls, last.tensors_total);
  EXPECT_EQ(last.bytes_done, last.bytes_total);
  StatusOr<ModelWeights> direct = MakeDummyModel(c, format, 42, 1);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  ExpectSameWeights(*loaded, *direct);
}

INSTANTIATE_TEST_SUITE_P(Formats, RoundTripTest,
                         ::testing::Combine(::testing::Values("tiny", "tiny-glm"),
                                            ::testing::Values(WeightFormat::kBf16, WeightFormat::kFp8Block128,
                                                              WeightFormat::kInt4Group32)));

// In-memory tensors with edits, for the error paths.
class Tensors {
 public:
  Tensors(const ModelConfig& c, WeightFormat f) : config_(WithQuantization(c, f)) {
    owned_ = *MakeDummyTensors(config_, f, 3, 1);
    for (OwnedTensor& t : owned_) views_[t.name] = io::TensorView{t.name, t.dtype, t.shape, t.data};
  }
  io::TensorView& operator[](const std::string& name) { return views_.at(name); }
  void Erase(const std::string& name) { views_.erase(name); }
  // A stray [1, 1] bf16 tensor the model does not use.
  void Add(const std::string& name) {
    views_[name] = io::TensorView{name, DType::kBF16, {1, 1}, std::as_bytes(std::span(one_))};
  }
  StatusOr<ModelWeights> Assemble(LoadOptions options = {}) {
    options.threads = 1;
    return AssembleModel(
        config_,
        [&](std::string_view n) -> const io::TensorView* {
          auto it = views_.find(std::string(n));
          return it == views_.end() ? nullptr : &it->second;
        },
        options);
  }
  ModelConfig config_;

 private:
  std::vector<OwnedTensor> owned_;
  uint16_t one_[1] = {0x3f80};
  std::map<std::string, io::TensorView> views_;
};

TEST(LoaderTest, MissingTensorNamesItAndItsShape) {
  const ModelConfig c = MustPreset("tiny");
  const std::string dir = FreshDir();
  ASSERT_TRUE(WriteDummyCheckpoint(dir, c, WeightFormat::kBf16, 1).ok());
  // Rewrite the safetensors without one tensor.
  io::Checkpoint full = *io::Checkpoint::Open(dir);
  std::vector<io::TensorToWrite> keep;
  for (std::string_view name : full.TensorNames()) {
    if (name == "model.layers.1.mlp.experts.3.down_proj.weight") continue;
    const io::TensorView& t = *full.Find(name);
    keep.push_back({t.name, t.dtype, t.shape, t.data});
  }
  const std::string dir2 = FreshDir("_2");
  ASSERT_TRUE(io::WriteCheckpoint(dir2, keep, 1'000'000'000).ok());
  fs::copy_file(fs::path(dir) / "config.json", fs::path(dir2) / "config.json");
  StatusOr<ModelWeights> w = LoadModel(dir2);
  ASSERT_EQ(w.status().code(), StatusCode::kNotFound) << w.status().ToString();
  EXPECT_NE(w.status().message().find(
                "missing tensor 'model.layers.1.mlp.experts.3.down_proj.weight' (expected [128, 64])"),
            std::string::npos)
      << w.status().message();
}

TEST(LoaderTest, WrongShapeAndDtypeNameTheTensor) {
  Tensors t(MustPreset("tiny-glm"), WeightFormat::kBf16);
  t["model.layers.2.self_attn.o_proj.weight"].shape = {128, 64, 1};
  t["model.layers.0.self_attn.indexer.k_norm.bias"].dtype = DType::kI32;
  t.Erase("model.norm.weight");
  StatusOr<ModelWeights> w = t.Assemble();
  ASSERT_FALSE(w.ok());
  const std::string& m = w.status().message();
  EXPECT_NE(m.find("3 checkpoint tensor problem(s)"), std::string::npos) << m;
  EXPECT_NE(
      m.find("tensor 'model.layers.2.self_attn.o_proj.weight': shape [128, 64, 1], expected [128, 256]"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("'model.layers.0.self_attn.indexer.k_norm.bias': dtype I32, expected BF16/F16/F32"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("missing tensor 'model.norm.weight' (expected [128])"), std::string::npos) << m;
}

TEST(LoaderTest, QuantizedTensorErrors) {
  {
    Tensors t(MustPreset("tiny"), WeightFormat::kFp8Block128);
    t.Erase("model.layers.0.self_attn.o_proj.weight_scale_inv");
    StatusOr<ModelWeights> w = t.Assemble();
    EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
    EXPECT_NE(
        w.status().message().find("'model.layers.0.self_attn.o_proj.weight_scale_inv' (expected [1, 1])"),
        std::string::npos)
        << w.status().message();
  }
  {
    Tensors t(MustPreset("tiny"), WeightFormat::kInt4Group32);
    t["model.layers.1.mlp.experts.0.up_proj.weight_scale"].shape = {64, 2};
    t.Erase("model.layers.2.mlp.experts.5.gate_proj.weight_scale");
    StatusOr<ModelWeights> w = t.Assemble();
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.status().message().find("up_proj.weight_scale': shape [64, 2], expected [64, 4]"),
              std::string::npos)
        << w.status().message();
    EXPECT_NE(w.status().message().find("experts.5.gate_proj.weight_scale' (expected [64, 4])"),
              std::string::npos)
        << w.status().message();
  }
}

TEST(LoaderTest, FormatMismatchWarnsOrFails) {
  Tensors t(MustPreset("tiny"), WeightFormat::kBf16);
  t.config_ = WithQuantization(t.config_, WeightFormat::kFp8Block128);  // config says fp8, tensors are bf16
  EXPECT_TRUE(t.Assemble().ok());
  LoadOptions strict;
  strict.strict_formats = true;
  StatusOr<ModelWeights> w = t.Assemble(strict);
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("is bf16 in the checkpoint but quantization_config says fp8"),
            std::string::npos)
      << w.status().message();
}

TEST(LoaderTest, F32LinearRoundsToBf16AndTiedHeadCopiesEmbeddings) {
  ModelConfig c = MustPreset("tiny");
  c.tie_word_embeddings = true;
  Tensors t(c, WeightFormat::kBf16);
  const std::string name = "model.layers.0.mlp.up_proj.weight";  // [256, 128]
  std::vector<float> f32(256 * 128, 0.1f);
  t[name].dtype = DType::kF32;
  t[name].data = std::as_bytes(std::span<const float>(f32));
  StatusOr<ModelWeights> w = t.Assemble();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->layers[0].dense_mlp.up_proj.bf16()[77], FloatToBf16(0.1f));
  ASSERT_TRUE(w->lm_head_tied);
  ASSERT_EQ(w->lm_head.rows(), 1024);
  for (int i = 0; i < 1024 * 128; i += 997) {
    EXPECT_EQ(w->lm_head.bf16()[i], FloatToBf16(w->embed_tokens[i]));
  }
}

TEST(LoaderTest, VariantsPrefixNoQLoraMoeFreqAndExtraTensors) {
  ModelConfig c = MustPreset("tiny");
  c.tensor_prefix = "language_model.";  // Kimi K2.5/K2.6 checkpoints
  c.q_lora_rank = 0;                    // plain q_proj
  c.num_hidden_layers = 4;
  c.moe_layer_freq = 2;  // MoE on layers 2 only (>= first_k_dense_replace 1 and even)
  Tensors t(c, WeightFormat::kInt4Group32);
  // An MTP-style extra layer and a vision tensor: ignored.
  t.Add("language_model.model.layers.4.self_attn.o_proj.weight");
  t.Add("vision_tower.patch_embed.proj.weight");
  StatusOr<ModelWeights> w = t.Assemble();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->layers[0].attn.q_proj.rows(), 4 * 48);
  EXPECT_EQ(w->layers[0].attn.q_a_proj.rows(), 0);
  EXPECT_FALSE(w->layers[1].is_moe);
  EXPECT_TRUE(w->layers[2].is_moe);
  EXPECT_FALSE(w->layers[3].is_moe);
  EXPECT_EQ(w->layers[2].moe.experts[7].down_proj.format(), WeightFormat::kInt4Group32);
  EXPECT_EQ(w->layers[2].moe.shared_experts.down_proj.format(), WeightFormat::kBf16);
  EXPECT_EQ(w->LinearFormatCounts()[2], 8 * 3);
}

TEST(LoaderTest, ProgressBarAndMissingDirectory) {
  EXPECT_EQ(LoadModel(::testing::TempDir() + "/no_such_checkpoint").status().code(), StatusCode::kNotFound);
  LoadProgressFn bar = StderrProgressBar();
  bar({.bytes_done = 5, .bytes_total = 10, .tensors_done = 1, .tensors_total = 2, .seconds = 0.5});
  bar({.bytes_done = 10, .bytes_total = 10, .tensors_done = 2, .tensors_total = 2, .seconds = 1.0});
}

}  // namespace
}  // namespace tandem::engine::model
