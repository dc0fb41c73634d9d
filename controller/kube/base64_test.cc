#include "controller/kube/base64.h"

#include <gtest/gtest.h>

namespace tandem::controller::kube {
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

}  // namespace
}  // namespace tandem::controller::kube
