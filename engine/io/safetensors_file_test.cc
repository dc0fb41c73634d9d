#include "engine/io/safetensors_file.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/io/safetensors_header.h"
#include "engine/io/safetensors_writer.h"
#include "engine/io/test_util.h"

namespace tandem::engine::io {
namespace {

using testing::Bytes;
using testing::FreshDir;

std::vector<std::byte> Pattern(size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return out;
}

TEST(SafetensorsFile, RoundTripKeepsBytesShapesDtypesAndMetadata) {
  const auto f32 = Pattern(4 * 6, 1), bf16 = Pattern(2 * 5, 2), u8 = Pattern(3, 3), f64 = Pattern(8, 4);
  const std::vector<TensorToWrite> tensors = {
      {"layer.0.weight", DType::kF32, {2, 3}, f32},
      {"layer.0.bias", DType::kBF16, {5}, bf16},
      {"tokens", DType::kU8, {3}, u8},
      {"scale", DType::kF64, {}, f64},
      {"empty", DType::kF16, {0, 7}, {}},
  };
  const std::string path = FreshDir() + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}, {"note", "héllo"}}).ok());

  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->metadata().at("note"), "héllo");
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (const TensorToWrite& want : tensors) {
    const TensorView* got = file->Find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->dtype, want.dtype);
    EXPECT_EQ(got->shape, want.shape);
    ASSERT_EQ(got->data.size(), want.data.size());
    EXPECT_TRUE(std::equal(got->data.begin(), got->data.end(), want.data.begin())) << want.name;
    // The writer orders by element size, so each tensor is aligned in the page-aligned mapping.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got->data.data()) % DTypeBytes(got->dtype), 0u) << want.name;
  }
  EXPECT_EQ(file->Find("empty")->num_elements(), 0);
  EXPECT_EQ(file->Find("layer.0.weight")->num_elements(), 6);
  EXPECT_EQ(file->Find("scale")->num_elements(), 1);
  EXPECT_EQ(file->Find("absent"), nullptr);
}

TEST(SafetensorsFile, SerializedHeaderIsSpacePaddedToEightBytes) {
  const auto data = Pattern(3, 0);
  const std::vector<TensorToWrite> tensors = {{"x", DType::kU8, {3}, data}};
  StatusOr<std::vector<std::byte>> image = SerializeSafetensors(tensors);
  ASSERT_TRUE(image.ok());
  StatusOr<SafetensorsLayout> layout = ParseSafetensors(*image, "memory");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->data_offset % 8, 0u);
  EXPECT_EQ(static_cast<char>((*image)[layout->data_offset - 1]), ' ');
  EXPECT_EQ(image->size(), layout->data_offset + 3);
}

TEST(SafetensorsFile, WritesAndReadsAFileWithNoTensors) {
  const std::string path = FreshDir() + "/empty.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {}).ok());
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->tensors().empty());
}

TEST(SafetensorsFile, WriterRejectsInvalidTensors) {
  const auto four = Pattern(4, 0);
  auto status_of = [](std::vector<TensorToWrite> tensors) { return SerializeSafetensors(tensors).status(); };
  EXPECT_EQ(status_of({{"a", DType::kU8, {4}, four}, {"a", DType::kU8, {4}, four}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of({{"a", DType::kF32, {2}, four}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of({{"a", DType::kU8, {-4}, four}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of({{"", DType::kU8, {4}, four}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of({{"__metadata__", DType::kU8, {4}, four}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of({{"bad\xff", DType::kU8, {4}, four}}).code(), StatusCode::kInvalidArgument);
}

TEST(SafetensorsFile, AtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  const std::string dir = FreshDir();
  const std::string path = dir + "/m.safetensors";
  const auto a = Pattern(8, 1), b = Pattern(16, 2);
  ASSERT_TRUE(WriteSafetensors(path, std::vector<TensorToWrite>{{"a", DType::kU8, {8}, a}}).ok());
  ASSERT_TRUE(WriteSafetensors(path, std::vector<TensorToWrite>{{"b", DType::kU8, {16}, b}}).ok());
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->Find("a"), nullptr);
  ASSERT_NE(file->Find("b"), nullptr);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST(SafetensorsFile, WriteIntoMissingDirectoryFails) {
  const auto a = Pattern(1, 1);
  Status s = WriteSafetensors(FreshDir() + "/no/such/dir/m.safetensors",
                              std::vector<TensorToWrite>{{"a", DType::kU8, {1}, a}});
  EXPECT_FALSE(s.ok());
}

TEST(SafetensorsFile, OpenMissingFileIsNotFound) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(FreshDir() + "/absent.safetensors");
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsFile, OpenDirectoryIsInvalidArgument) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(FreshDir());
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
}

TEST(SafetensorsFile, OpenTruncatedFileNamesIt) {
  const auto data = Pattern(64, 5);
  StatusOr<std::vector<std::byte>> image =
      SerializeSafetensors(std::vector<TensorToWrite>{{"w", DType::kF32, {16}, data}});
  ASSERT_TRUE(image.ok());
  image->resize(image->size() - 1);
  const std::string path = FreshDir() + "/cut.safetensors";
  testing::WriteRaw(path, *image);
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_EQ(file.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find(path), std::string::npos);
  EXPECT_NE(file.status().message().find("tensor 'w'"), std::string::npos);
}

TEST(SafetensorsFile, OpenEmptyFileIsDataLoss) {
  const std::string path = FreshDir() + "/zero.safetensors";
  testing::WriteRaw(path, Bytes(""));
  EXPECT_EQ(SafetensorsFile::Open(path).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tandem::engine::io
