#include "common/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(JsonDepthWithin, CountsArraysAndObjectsNotStrings) {
  EXPECT_TRUE(JsonDepthWithin("", 0));
  EXPECT_TRUE(JsonDepthWithin("7", 0));
  EXPECT_FALSE(JsonDepthWithin("[]", 0));
  EXPECT_TRUE(JsonDepthWithin(R"({"a":[1,{"b":2}]})", 3));
  EXPECT_FALSE(JsonDepthWithin(R"({"a":[1,{"b":2}]})", 2));
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_TRUE(JsonDepthWithin(R"({"s":"\"[[[["})", 1));
  EXPECT_FALSE(JsonDepthWithin(R"({"s":[]})", 1));
  EXPECT_TRUE(JsonDepthWithin(R"(["\\",[]])", 2));
}

TEST(JsonDepthWithin, APrefixIsJudgedByWhatItOpened) {
  const std::string deep = std::string(100000, '[');
  EXPECT_FALSE(JsonDepthWithin(deep, 1000));
  EXPECT_TRUE(JsonDepthWithin(deep.substr(0, 1000), 1000));
  EXPECT_TRUE(JsonDepthWithin(std::string(1000, '[') + std::string(1000, ']') + "[", 1000));
}

}  // namespace
}  // namespace tandem
