#include "controller/kube/line_splitter.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::controller::kube {
namespace {

struct Split {
  std::vector<std::string> lines;
  bool stopped = false;
  Status status;
};

// Feeds `stream` in pieces of `piece` bytes (0: all at once), stopping at a line "stop".
Split SplitInPieces(std::string_view stream, size_t piece, size_t max_line_bytes = 64) {
  Split out;
  LineSplitter splitter(max_line_bytes);
  const LineSplitter::OnLine on_line = [&](std::string_view line) {
    out.lines.emplace_back(line);
    return line != "stop";
  };
  const size_t step = piece == 0 ? stream.size() : piece;
  bool more = true;
  for (size_t at = 0; more && at < stream.size(); at += step)
    more = splitter.Feed(stream.substr(at, step), on_line);
  if (more) splitter.Finish(on_line);
  out.stopped = splitter.stopped();
  out.status = splitter.status();
  return out;
}

TEST(LineSplitter, LinesDoNotDependOnWhereTheStreamIsCut) {
  const std::string stream = "a\r\n\nbb\n\r\nccc\r\rdd";
  const std::vector<std::string> want = {"a", "bb", "ccc\r\rdd"};
  for (size_t piece : {0, 1, 2, 3, 5, 17}) {
    Split s = SplitInPieces(stream, piece);
    EXPECT_EQ(s.lines, want) << piece;
    EXPECT_FALSE(s.stopped);
    EXPECT_TRUE(s.status.ok()) << s.status.ToString();
  }
}

TEST(LineSplitter, StopsWhenTheCallbackSaysSo) {
  for (size_t piece : {0, 1, 4}) {
    Split s = SplitInPieces("x\nstop\ny\nunterminated", piece);
    EXPECT_EQ(s.lines, (std::vector<std::string>{"x", "stop"})) << piece;
    EXPECT_TRUE(s.stopped);
  }
}

TEST(LineSplitter, ALongLineEndsTheStreamWhereverItIsCut) {
  const std::string stream = "ok\n" + std::string(9, 'x') + "\nnever\n";
  for (size_t piece : {0, 1, 4}) {
    Split s = SplitInPieces(stream, piece, /*max_line_bytes=*/8);
    EXPECT_EQ(s.lines, (std::vector<std::string>{"ok"})) << piece;
    EXPECT_EQ(s.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status.message().find("longer than 8 bytes"), std::string::npos) << s.status.ToString();
  }
  // Exactly the limit passes, the "\r" included; so does an unterminated last line of that size.
  EXPECT_EQ(SplitInPieces(std::string(7, 'y') + "\r\n" + std::string(8, 'z'), 3, 8).lines,
            (std::vector<std::string>{std::string(7, 'y'), std::string(8, 'z')}));
}

}  // namespace
}  // namespace tandem::controller::kube
