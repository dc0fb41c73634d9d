// `tandem quantize` as a user runs it: arguments, exit codes, the report and the files written.
// The library's own checks (bit-exact codes, every error case) are in engine/io.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/formats/float_codecs.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_writer.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
namespace eio = engine::io;

class QuantizeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = (fs::path(::testing::TempDir()) / (std::string("tools_quantize_") + info->name())).string();
    fs::remove_all(root_);
    in_ = root_ + "/in";
    out_ = root_ + "/out";
    WriteInput();
  }

  // One MoE layer (2 experts, K = 64), attention, embeddings and head: BF16 Gaussian.
  void WriteInput() {
    const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
        {"model.embed_tokens.weight", {32, 64}},
        {"lm_head.weight", {32, 64}},
        {"model.norm.weight", {64}},
        {"model.layers.0.self_attn.o_proj.weight", {64, 64}},
        {"model.layers.0.mlp.gate.weight", {2, 64}},
        {"model.layers.0.mlp.experts.0.up_proj.weight", {32, 64}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", {64, 32}},
        {"model.layers.0.mlp.experts.1.up_proj.weight", {32, 64}},
        {"model.layers.0.mlp.experts.1.down_proj.weight", {64, 32}},
    };
    std::mt19937 rng(3);
    std::normal_distribution<float> gauss(0.0f, 0.05f);
    std::vector<eio::TensorToWrite> tensors;
    for (const auto& [name, shape] : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<uint16_t>& bits = buffers_.emplace_back(static_cast<size_t>(n));
      for (uint16_t& b : bits) b = engine::FloatToBf16(gauss(rng));
      tensors.push_back({name, engine::DType::kBF16, shape, std::as_bytes(std::span<const uint16_t>(bits))});
    }
    ASSERT_TRUE(eio::WriteCheckpoint(in_, tensors, 1 << 20).ok());
    std::ofstream(in_ + "/config.json") << R"({"model_type": "deepseek_v3"})";
    std::ofstream(in_ + "/generation_config.json") << R"({"temperature": 0.6})";
  }

  int Run(const std::vector<std::string>& args, std::string* out = nullptr) {
    ::testing::internal::CaptureStdout();
    const int rc = RunQuantize(args);
    const std::string text = ::testing::internal::GetCapturedStdout();
    if (out != nullptr) *out = text;
    return rc;
  }

  std::string root_, in_, out_;
  std::vector<std::vector<uint16_t>> buffers_;
};

TEST_F(QuantizeCliTest, Int4WritesCheckpointAndReport) {
  std::string report;
  ASSERT_EQ(Run({"--input", in_, "--output", out_, "--to", "int4", "--threads", "2", "--progress"}, &report),
            0);
  EXPECT_NE(report.find("tensors: 4 quantized, 5 kept"), std::string::npos) << report;
  EXPECT_NE(report.find("ratio 0."), std::string::npos) << report;
  EXPECT_NE(report.find("relative Frobenius error"), std::string::npos) << report;
  EXPECT_NE(report.find("worst 4:"), std::string::npos) << report;
  StatusOr<eio::Checkpoint> out = eio::Checkpoint::Open(out_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE(out->Find("model.layers.0.mlp.experts.1.down_proj.weight_packed"), nullptr);
  EXPECT_NE(out->Find("model.layers.0.self_attn.o_proj.weight"), nullptr);
  EXPECT_TRUE(fs::exists(out_ + "/config.json"));
  EXPECT_TRUE(fs::exists(out_ + "/generation_config.json"));
}

TEST_F(QuantizeCliTest, Fp8ShardedOutput) {
  std::string report;
  ASSERT_EQ(Run({"--input", in_, "--output", out_, "--to", "fp8", "--max-shard-bytes", "4096"}, &report), 0);
  EXPECT_NE(report.find("tensors: 5 quantized, 4 kept"), std::string::npos) << report;
  EXPECT_TRUE(fs::exists(out_ + "/model.safetensors.index.json"));
  StatusOr<eio::Checkpoint> out = eio::Checkpoint::Open(out_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->Find("model.layers.0.self_attn.o_proj.weight")->dtype, engine::DType::kF8E4M3);
}

TEST_F(QuantizeCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run({}), 2);
  EXPECT_EQ(Run({"--input", in_, "--output", out_}), 2);
  EXPECT_EQ(Run({"--input", in_, "--output", out_, "--to", "int3"}), 2);
  EXPECT_EQ(Run({"--input", in_, "--output", out_, "--to", "int4", "--threads", "0"}), 2);
  EXPECT_EQ(Run({"--input", in_, "--output", out_, "--to", "int4", "--max-shard-bytes", "-5"}), 2);
  EXPECT_EQ(Run({"--input", in_, "--output"}), 2);
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(QuantizeCliTest, FailuresExitOneWithoutConfig) {
  EXPECT_EQ(Run({"--input", root_ + "/missing", "--output", out_, "--to", "int4"}), 1);
  EXPECT_EQ(Run({"--input", in_, "--output", in_, "--to", "int4"}), 1);
  std::ofstream(in_ + "/config.json", std::ios::trunc) << "{";
  EXPECT_EQ(Run({"--input", in_, "--output", out_, "--to", "fp8"}), 1);
  EXPECT_FALSE(fs::exists(out_ + "/config.json"));
}

}  // namespace
}  // namespace tandem::tools
