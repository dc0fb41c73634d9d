#include "common/base64.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(Base64, RoundTripsEveryLength) {
  std::string data;
  for (int n = 0; n < 70; ++n) {
    std::string decoded;
    ASSERT_TRUE(Base64Decode(Base64Encode(data), &decoded)) << n;
    EXPECT_EQ(decoded, data) << n;
    data.push_back(static_cast<char>(n * 37 + 11));
  }
}

TEST(Base64, KnownVectors) {
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  std::string out;
  ASSERT_TRUE(Base64Decode("Zm9v\nYmE=\n", &out));  // kubeconfig data may be wrapped
  EXPECT_EQ(out, "fooba");
  ASSERT_TRUE(Base64Decode("Zm9vYg", &out));  // padding optional
  EXPECT_EQ(out, "foob");
}

TEST(Base64, RejectsMalformedInput) {
  std::string out;
  EXPECT_FALSE(Base64Decode("Zm9v!mFy", &out));   // bad character
  EXPECT_FALSE(Base64Decode("Zm9vY", &out));      // a lone 6-bit group
  EXPECT_FALSE(Base64Decode("Zm9=vYmFy", &out));  // data after padding
  EXPECT_FALSE(Base64Decode("Zg===", &out));      // too much padding
  EXPECT_FALSE(Base64Decode("Zh==", &out));       // non-zero leftover bits
}

TEST(Base64, StrictModeWantsPaddingAndNoWhitespace) {
  std::string out;
  ASSERT_TRUE(Base64Decode("Zm9vYg==", &out, Base64Mode::kStrict));
  EXPECT_EQ(out, "foob");
  EXPECT_FALSE(Base64Decode("Zm9vYg", &out, Base64Mode::kStrict));      // padding missing
  EXPECT_FALSE(Base64Decode("Zm9v\nYmE=", &out, Base64Mode::kStrict));  // whitespace
  EXPECT_FALSE(Base64Decode("", &out, Base64Mode::kStrict));
  for (int b = 0; b < 256; ++b) {  // every single byte, as tiktoken rank files spell them
    const std::string one(1, static_cast<char>(b));
    ASSERT_TRUE(Base64Decode(Base64Encode(one), &out, Base64Mode::kStrict)) << b;
    EXPECT_EQ(out, one);
  }
}

}  // namespace
}  // namespace tandem
