#include "engine/io/safetensors_header.h"

#include <string>

#include <gtest/gtest.h>

#include "engine/io/test_util.h"

namespace tandem::engine::io {
namespace {

using testing::Image;

StatusOr<SafetensorsLayout> Parse(const std::vector<std::byte>& image) {
  return ParseSafetensors(image, "bad.safetensors");
}

// Expects `code` and a message naming the file and containing `needle`.
void ExpectError(const std::vector<std::byte>& image, StatusCode code, const std::string& needle) {
  StatusOr<SafetensorsLayout> layout = Parse(image);
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), code) << layout.status().ToString();
  EXPECT_NE(layout.status().message().find("bad.safetensors"), std::string::npos)
      << layout.status().ToString();
  EXPECT_NE(layout.status().message().find(needle), std::string::npos) << layout.status().ToString();
}

TEST(SafetensorsHeader, ParsesTensorsAndMetadata) {
  auto image =
      Image(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("a":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"__metadata__":{"format":"pt"}})",
            "0123456789ab");
  StatusOr<SafetensorsLayout> layout = Parse(image);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  const uint64_t data_offset = image.size() - 12;
  EXPECT_EQ(layout->data_offset, data_offset);
  ASSERT_EQ(layout->tensors.size(), 2u);
  EXPECT_EQ(layout->tensors[0].name, "a");
  EXPECT_EQ(layout->tensors[0].dtype, DType::kBF16);
  EXPECT_EQ(layout->tensors[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(layout->tensors[0].begin, data_offset + 8);
  EXPECT_EQ(layout->tensors[0].size_bytes(), 4u);
  EXPECT_EQ(layout->tensors[1].name, "b");
  EXPECT_EQ(layout->tensors[1].dtype, DType::kF32);
  EXPECT_EQ(layout->metadata.at("format"), "pt");
}

TEST(SafetensorsHeader, RecognizesEveryDtype) {
  const std::pair<const char*, DType> cases[] = {
      {"F64", DType::kF64},   {"F32", DType::kF32},        {"F16", DType::kF16},
      {"BF16", DType::kBF16}, {"F8_E4M3", DType::kF8E4M3}, {"F8_E5M2", DType::kF8E5M2},
      {"I64", DType::kI64},   {"I32", DType::kI32},        {"I16", DType::kI16},
      {"I8", DType::kI8},     {"U64", DType::kU64},        {"U32", DType::kU32},
      {"U16", DType::kU16},   {"U8", DType::kU8},          {"BOOL", DType::kBool},
  };
  for (const auto& [name, dtype] : cases) {
    const size_t bytes = DTypeBytes(dtype) * 3;
    auto image = Image(std::string(R"({"t":{"dtype":")") + name + R"(","shape":[3],"data_offsets":[0,)" +
                           std::to_string(bytes) + "]}}",
                       std::string(bytes, 'x'));
    StatusOr<SafetensorsLayout> layout = Parse(image);
    ASSERT_TRUE(layout.ok()) << name << ": " << layout.status().ToString();
    EXPECT_EQ(layout->tensors[0].dtype, dtype) << name;
  }
}

TEST(SafetensorsHeader, ScalarsEmptyTensorsAndSpacePadding) {
  auto image = Image(R"({"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                     R"("e":{"dtype":"F32","shape":[0,4],"data_offsets":[8,8]},)"
                     R"("z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}      )",
                     "12345678");
  StatusOr<SafetensorsLayout> layout = Parse(image);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->tensors.size(), 3u);
  EXPECT_EQ(layout->tensors[0].size_bytes(), 0u);  // e
  EXPECT_TRUE(layout->tensors[1].shape.empty());   // s
  EXPECT_EQ(layout->tensors[1].size_bytes(), 8u);
}

TEST(SafetensorsHeader, EmptyHeaderObjectHasNoTensors) {
  StatusOr<SafetensorsLayout> layout = Parse(Image("{}"));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_TRUE(layout->tensors.empty());
}

TEST(SafetensorsHeader, GapsAndTrailingBytesAreAccepted) {
  auto image = Image(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                     R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
                     "ab....cd__trailing");
  ASSERT_TRUE(Parse(image).ok());
}

TEST(SafetensorsHeader, RejectsFileShorterThanLengthPrefix) {
  ExpectError({}, StatusCode::kDataLoss, "shorter than the 8-byte header length");
  ExpectError(testing::Bytes(std::string_view("\x02\x00\x00", 3)), StatusCode::kDataLoss, "3 bytes");
}

TEST(SafetensorsHeader, RejectsHeaderLengthPastEndOfFile) {
  ExpectError(Image("{}", "", 3), StatusCode::kDataLoss, "runs past the end");
}

TEST(SafetensorsHeader, RejectsAbsurdHeaderLength) {
  ExpectError(Image("{}", "", int64_t{1} << 62), StatusCode::kDataLoss, "exceeds the limit");
  ExpectError(Image("{}", "", 100'000'001), StatusCode::kDataLoss, "exceeds the limit");
}

TEST(SafetensorsHeader, RejectsMalformedJson) {
  ExpectError(Image(R"({"a": {"dtype": )"), StatusCode::kDataLoss, "invalid JSON");
  ExpectError(Image(std::string("{\"a\0\":1}", 8)), StatusCode::kDataLoss, "invalid JSON");
  ExpectError(Image("{\"\xff\xfe\":{}}"), StatusCode::kDataLoss, "invalid JSON");
}

TEST(SafetensorsHeader, RejectsNonObjectHeader) {
  ExpectError(Image("[1,2]"), StatusCode::kDataLoss, "not a JSON object");
  ExpectError(Image("42      "), StatusCode::kDataLoss, "not a JSON object");
}

TEST(SafetensorsHeader, RejectsNonObjectTensorEntry) {
  ExpectError(Image(R"({"w":[1,2]})"), StatusCode::kDataLoss, "tensor 'w': entry is not a JSON object");
}

TEST(SafetensorsHeader, RejectsMissingFields) {
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd"), StatusCode::kDataLoss,
              "tensor 'w': entry needs");
}

TEST(SafetensorsHeader, RejectsUnknownDtype) {
  ExpectError(Image(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "a"),
              StatusCode::kInvalidArgument, "tensor 'w': unsupported dtype 'F4'");
  ExpectError(Image(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,1]}})", "a"), StatusCode::kDataLoss,
              "\"dtype\" is not a string");
}

TEST(SafetensorsHeader, RejectsNegativeDimension) {
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})"), StatusCode::kDataLoss,
              "tensor 'w': shape has a negative dimension -1");
}

TEST(SafetensorsHeader, RejectsNonIntegerDimension) {
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "a"), StatusCode::kDataLoss,
              "non-integer dimension 1.5");
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}})", "a"), StatusCode::kDataLoss,
              "non-integer dimension");
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,1]}})", "a"), StatusCode::kDataLoss,
              "\"shape\" is not an array");
}

TEST(SafetensorsHeader, RejectsElementCountOverflow) {
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
              StatusCode::kDataLoss, "overflows 64 bits");
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})"),
              StatusCode::kDataLoss, "too large");
}

TEST(SafetensorsHeader, RejectsSizeNotMatchingOffsets) {
  ExpectError(Image(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})", "abcd"),
              StatusCode::kDataLoss,
              "tensor 'w': shape [3] of F16 needs 6 bytes but data_offsets [0,4] hold 4");
}

TEST(SafetensorsHeader, RejectsOffsetsOutOfRange) {
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", "abcd"),
              StatusCode::kDataLoss, "tensor 'w': data_offsets [2,6] run past the 4-byte data section");
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[9,9]}})", "abcd"),
              StatusCode::kDataLoss, "run past");
}

TEST(SafetensorsHeader, RejectsMalformedOffsets) {
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}})", "abcd"),
              StatusCode::kDataLoss, "end before they begin");
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "abcd"),
              StatusCode::kDataLoss, "\"data_offsets\" is not [begin, end]");
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "abcd"),
              StatusCode::kDataLoss, "\"data_offsets\" is not [begin, end]");
}

TEST(SafetensorsHeader, RejectsOverlappingTensors) {
  ExpectError(Image(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                    R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                    "abcd"),
              StatusCode::kDataLoss, "tensors 'a' and 'b' overlap");
  // A tensor nested inside a longer one that an intermediate tensor does not reach.
  ExpectError(Image(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
                    R"("c":{"dtype":"U8","shape":[1],"data_offsets":[5,6]}})",
                    "abcdefgh"),
              StatusCode::kDataLoss, "overlap");
}

TEST(SafetensorsHeader, EmptyTensorsNeverOverlap) {
  auto image = Image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}})",
                     "abcd");
  ASSERT_TRUE(Parse(image).ok());
}

TEST(SafetensorsHeader, RejectsDuplicateTensorNames) {
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                    "ab"),
              StatusCode::kDataLoss, "duplicate key 'w'");
}

TEST(SafetensorsHeader, RejectsBadMetadata) {
  ExpectError(Image(R"({"__metadata__":{"k":1}})"), StatusCode::kDataLoss, "value of 'k' is not a string");
  ExpectError(Image(R"({"__metadata__":"x"})"), StatusCode::kDataLoss,
              "\"__metadata__\" is not a JSON object");
}

}  // namespace
}  // namespace tandem::engine::io
