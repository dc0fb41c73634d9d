#include "common/logging.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([this](LogLevel level, const std::string& line) {
      levels_.push_back(level);
      lines_.push_back(line);
    });
    SetMinLogLevel(LogLevel::kInfo);
  }
  void TearDown() override {
    SetLogSink(nullptr);
    SetMinLogLevel(LogLevel::kInfo);
  }
  std::vector<LogLevel> levels_;
  std::vector<std::string> lines_;
};

TEST_F(LoggingTest, FormatsOneLineWithLevelFileAndMessage) {
  TANDEM_LOG(Warning) << "pages free: " << 17;
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(levels_[0], LogLevel::kWarning);
  const std::string& line = lines_[0];
  EXPECT_EQ(line[0], 'W');
  EXPECT_NE(line.find("common/logging_test.cc:"), std::string::npos) << line;
  EXPECT_NE(line.find("] pages free: 17"), std::string::npos) << line;
}

TEST_F(LoggingTest, FiltersBelowThresholdWithoutEvaluating) {
  int evaluated = 0;
  auto side_effect = [&] { return ++evaluated; };
  TANDEM_LOG(Debug) << side_effect();
  EXPECT_TRUE(lines_.empty());
  EXPECT_EQ(evaluated, 0);
  SetMinLogLevel(LogLevel::kDebug);
  TANDEM_LOG(Debug) << side_effect();
  EXPECT_EQ(lines_.size(), 1u);
  EXPECT_EQ(evaluated, 1);
}

TEST_F(LoggingTest, CheckPassesSilently) {
  TANDEM_CHECK(1 + 1 == 2) << "never printed";
  EXPECT_TRUE(lines_.empty());
}

TEST(LoggingDeathTest, CheckFailureAbortsWithCondition) {
  EXPECT_DEATH({ TANDEM_CHECK(2 + 2 == 5) << "arithmetic"; }, "Check failed: 2 \\+ 2 == 5 arithmetic");
}

}  // namespace
}  // namespace tandem
