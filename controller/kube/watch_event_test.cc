#include "controller/kube/watch_event.h"

#include <string>

#include <gtest/gtest.h>

#include "controller/kube/json_depth.h"

namespace tandem::controller::kube {
namespace {

TEST(DecodeWatchEvent, ReadsTypeAndObject) {
  StatusOr<WatchEvent> e = DecodeWatchEvent(R"({"type":"MODIFIED","object":{"metadata":{"name":"a"}}})", "W");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->type, "MODIFIED");
  EXPECT_EQ(e->object, Json({{"metadata", {{"name", "a"}}}}));
  StatusOr<WatchEvent> bare = DecodeWatchEvent(R"({"type":"BOOKMARK"})", "W");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->object, Json::object());
}

TEST(DecodeWatchEvent, MalformedLinesAreInternalErrors) {
  for (const char* line : {"not json", "[]", R"({"object":{}})", R"({"type":7})", R"({"type":"ADDED")"}) {
    StatusOr<WatchEvent> e = DecodeWatchEvent(line, "WATCH /x");
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_EQ(e.status().code(), StatusCode::kInternal) << line;
    EXPECT_EQ(e.status().message().rfind("WATCH /x: malformed watch event: ", 0), 0u)
        << e.status().ToString();
  }
  EXPECT_LT(DecodeWatchEvent(std::string(1000, '{'), "W").status().message().size(), 300u);
}

// Deeper than kMaxJsonDepth is refused before nlohmann/json (whose copies recurse) sees it.
TEST(DecodeWatchEvent, RefusesDeepNesting) {
  const auto nested = [](int depth) {  // the event object is one level, the array the rest
    return R"({"type":"ADDED","object":{"x":)" + std::string(depth - 2, '[') + std::string(depth - 2, ']') +
           "}}";
  };
  EXPECT_TRUE(DecodeWatchEvent(nested(kMaxJsonDepth), "W").ok());
  StatusOr<WatchEvent> deep = DecodeWatchEvent(nested(kMaxJsonDepth + 1), "W");
  EXPECT_EQ(deep.status().code(), StatusCode::kInternal);
  EXPECT_NE(deep.status().message().find("nested deeper than 1000"), std::string::npos)
      << deep.status().ToString();
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_TRUE(DecodeWatchEvent(R"({"type":"ADDED","object":{"s":"\"[[[[[[[[[[[["}})", "W").ok());
}

TEST(DecodeWatchEvent, ErrorEventsAreTheirStatus) {
  struct Case {
    const char* line;
    StatusCode want;
  };
  const Case cases[] = {
      {R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})",
       StatusCode::kOutOfRange},
      {R"({"type":"ERROR","object":{"code":403}})", StatusCode::kPermissionDenied},
      // No usable code: 500, still an error. 4294967706 is 2^32 + 410, not a 410.
      {R"({"type":"ERROR","object":{"code":4294967706}})", StatusCode::kUnavailable},
      {R"({"type":"ERROR","object":{"code":-410}})", StatusCode::kUnavailable},
      {R"({"type":"ERROR","object":{"code":410.5}})", StatusCode::kUnavailable},
      {R"({"type":"ERROR","object":[410]})", StatusCode::kUnavailable},
      {R"({"type":"ERROR"})", StatusCode::kUnavailable},
  };
  for (const Case& c : cases) {
    StatusOr<WatchEvent> e = DecodeWatchEvent(c.line, "W");
    ASSERT_FALSE(e.ok()) << c.line;
    EXPECT_EQ(e.status().code(), c.want) << c.line << ": " << e.status().ToString();
  }
}

}  // namespace
}  // namespace tandem::controller::kube
