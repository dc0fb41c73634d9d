#include "controller/kube/token_source.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace tandem::controller::kube {
namespace {

class TokenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("token-source-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "token").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }

  std::filesystem::path dir_;
  std::string path_;
  FakeClock clock_;
};

TEST_F(TokenSourceTest, StaticTokenNeverChanges) {
  TokenSource source("abc", "", 1000, clock_);
  EXPECT_EQ(source.Token().value(), "abc");
  EXPECT_FALSE(source.Invalidate());
  EXPECT_FALSE(source.from_file());
}

TEST_F(TokenSourceTest, FileIsReReadOnlyAfterTheInterval) {
  Write("one\n");
  TokenSource source("", path_, /*refresh_interval_ms=*/60'000, clock_);
  EXPECT_EQ(source.Token().value(), "one");  // trailing newline stripped
  Write("two");
  clock_.AdvanceMillis(59'999);
  EXPECT_EQ(source.Token().value(), "one");
  clock_.AdvanceMillis(1);
  EXPECT_EQ(source.Token().value(), "two");
}

TEST_F(TokenSourceTest, InvalidateRereadsAtOnceAndSaysWhetherItChanged) {
  Write("one");
  TokenSource source("", path_, 60'000, clock_);
  EXPECT_EQ(source.Token().value(), "one");
  EXPECT_FALSE(source.Invalidate());
  Write("two");
  EXPECT_TRUE(source.Invalidate());
  EXPECT_EQ(source.Token().value(), "two");
}

TEST_F(TokenSourceTest, MissingFileIsAnErrorFirstAndKeepsTheOldTokenLater) {
  TokenSource missing("", (dir_ / "absent").string(), 1000, clock_);
  StatusOr<std::string> t = missing.Token();
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("absent"), std::string::npos);

  Write("one");
  TokenSource source("", path_, 1000, clock_);
  EXPECT_EQ(source.Token().value(), "one");
  std::filesystem::remove(path_);
  clock_.AdvanceMillis(5000);
  EXPECT_EQ(source.Token().value(), "one");
  Write("");
  EXPECT_FALSE(source.Invalidate());  // an empty file is not a token
  EXPECT_EQ(source.Token().value(), "one");
}

}  // namespace
}  // namespace tandem::controller::kube
