#include "engine/io/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "engine/io/checkpoint_writer.h"
#include "engine/io/test_util.h"

namespace tandem::engine::io {
namespace {

namespace fs = std::filesystem;
using testing::FreshDir;

// Five tensors of 40..72 bytes: with a 100-byte limit they pack two to a shard at most.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 5; ++i) {
      buffers_.emplace_back(static_cast<size_t>(40 + 8 * i));
      for (size_t j = 0; j < buffers_.back().size(); ++j)
        buffers_.back()[j] = static_cast<std::byte>(i * 50 + j);
    }
    for (int i = 0; i < 5; ++i) {
      const int64_t elements = static_cast<int64_t>(buffers_[i].size()) / 4;
      tensors_.push_back({"layers." + std::to_string(i) + ".w", DType::kF32, {elements}, buffers_[i]});
    }
    dir_ = FreshDir();
  }

  void WriteText(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::trunc) << text;
  }

  void ExpectAllTensors(const Checkpoint& checkpoint) {
    ASSERT_EQ(checkpoint.num_tensors(), tensors_.size());
    for (const TensorToWrite& want : tensors_) {
      const TensorView* got = checkpoint.Find(want.name);
      ASSERT_NE(got, nullptr) << want.name;
      EXPECT_EQ(got->shape, want.shape);
      ASSERT_EQ(got->data.size(), want.data.size());
      EXPECT_EQ(std::memcmp(got->data.data(), want.data.data(), want.data.size()), 0);
    }
  }

  std::vector<std::vector<std::byte>> buffers_;
  std::vector<TensorToWrite> tensors_;
  std::string dir_;
};

TEST_F(CheckpointTest, SingleFileRoundTrip) {
  ASSERT_TRUE(WriteCheckpoint(dir_, tensors_, 1 << 20, {{"format", "pt"}}).ok());
  EXPECT_TRUE(fs::exists(dir_ + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ + "/model.safetensors.index.json"));
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  EXPECT_EQ(checkpoint->shards().size(), 1u);
  ExpectAllTensors(*checkpoint);
}

TEST_F(CheckpointTest, ShardedRoundTrip) {
  ASSERT_TRUE(WriteCheckpoint(dir_, tensors_, 100).ok());
  EXPECT_TRUE(fs::exists(dir_ + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir_ + "/model-00001-of-00004.safetensors"));
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  EXPECT_EQ(checkpoint->shards().size(), 4u);  // 40+48 | 56 | 64 | 72
  ExpectAllTensors(*checkpoint);
  std::vector<std::string_view> names = checkpoint->TensorNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(checkpoint->Find("nope"), nullptr);

  // Survives a move: views point into the mappings, not into the Checkpoint object.
  Checkpoint moved = std::move(checkpoint).value();
  ExpectAllTensors(moved);
}

TEST_F(CheckpointTest, RewritingAsOneShardRemovesTheStaleIndex) {
  ASSERT_TRUE(WriteCheckpoint(dir_, tensors_, 100).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, tensors_, 1 << 20).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/model.safetensors.index.json"));
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  ExpectAllTensors(*checkpoint);
}

TEST_F(CheckpointTest, EmptyDirectoryIsNotFound) {
  EXPECT_EQ(Checkpoint::Open(dir_).status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, MissingShardIsNotFound) {
  ASSERT_TRUE(WriteCheckpoint(dir_, tensors_, 100).ok());
  fs::remove(dir_ + "/model-00003-of-00004.safetensors");
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_EQ(checkpoint.status().code(), StatusCode::kNotFound);
  EXPECT_NE(checkpoint.status().message().find("model-00003-of-00004.safetensors"), std::string::npos);
}

TEST_F(CheckpointTest, TensorListedButAbsentFromItsShard) {
  ASSERT_TRUE(WriteSafetensors(dir_ + "/a.safetensors", std::span(tensors_).first(2)).ok());
  WriteText("model.safetensors.index.json",
            R"({"weight_map": {"layers.0.w": "a.safetensors", "layers.1.w": "a.safetensors",)"
            R"( "layers.2.w": "a.safetensors"}})");
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_EQ(checkpoint.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(checkpoint.status().message().find("'layers.2.w' is listed in shard a.safetensors"),
            std::string::npos)
      << checkpoint.status().ToString();
}

TEST_F(CheckpointTest, TensorInTwoShards) {
  ASSERT_TRUE(WriteSafetensors(dir_ + "/a.safetensors", std::span(tensors_).first(2)).ok());
  ASSERT_TRUE(WriteSafetensors(dir_ + "/b.safetensors", std::span(tensors_).subspan(1, 2)).ok());
  WriteText("model.safetensors.index.json",
            R"({"weight_map": {"layers.0.w": "a.safetensors", "layers.1.w": "a.safetensors",)"
            R"( "layers.2.w": "b.safetensors"}})");
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_EQ(checkpoint.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(checkpoint.status().message().find("'layers.1.w' is in two shards"), std::string::npos)
      << checkpoint.status().ToString();
}

TEST_F(CheckpointTest, ShardTensorMissingFromIndex) {
  ASSERT_TRUE(WriteSafetensors(dir_ + "/a.safetensors", std::span(tensors_).first(2)).ok());
  WriteText("model.safetensors.index.json", R"({"weight_map": {"layers.0.w": "a.safetensors"}})");
  StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
  ASSERT_EQ(checkpoint.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(checkpoint.status().message().find("'layers.1.w' of shard"), std::string::npos)
      << checkpoint.status().ToString();
}

TEST_F(CheckpointTest, MalformedIndexes) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"weight_map": {"x": "../escape.safetensors"}})", "not a file name"},
      {R"({"weight_map": {"x": 3}})", "not a file name"},
      {R"({"weight_map": []})", "no \"weight_map\" object"},
      {R"([1])", "no \"weight_map\" object"},
      {R"({"weight_map": {"x": "a", "x": "b"}})", "duplicate key 'x'"},
      {R"({"weight_map": )", "invalid JSON"},
  };
  for (const auto& [text, needle] : cases) {
    WriteText("model.safetensors.index.json", text);
    StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_);
    ASSERT_EQ(checkpoint.status().code(), StatusCode::kDataLoss) << text;
    EXPECT_NE(checkpoint.status().message().find(needle), std::string::npos)
        << checkpoint.status().ToString();
  }
}

TEST_F(CheckpointTest, WriterRejectsBadArguments) {
  EXPECT_EQ(WriteCheckpoint(dir_, tensors_, 0).code(), StatusCode::kInvalidArgument);
  std::vector<TensorToWrite> dup = {tensors_[0], tensors_[0]};
  EXPECT_EQ(WriteCheckpoint(dir_, dup, 100).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::engine::io
