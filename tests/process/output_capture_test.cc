#include "process/output_capture.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace steps {
namespace {

TEST(BoundedCaptureTest, KeepsEverythingUnderTheCap) {
  BoundedCapture capture(10, OutputKeep::kHead);
  capture.Append("abc");
  capture.Append("def");
  CapturedOutput out = capture.Finish();
  EXPECT_EQ(out.text, "abcdef");
  EXPECT_EQ(out.total_bytes, 6u);
  EXPECT_FALSE(out.truncated);
}

TEST(BoundedCaptureTest, HeadKeepsTheFirstBytes) {
  BoundedCapture capture(4, OutputKeep::kHead);
  capture.Append("abc");
  capture.Append("defgh");
  CapturedOutput out = capture.Finish();
  EXPECT_EQ(out.text, "abcd");
  EXPECT_EQ(out.total_bytes, 8u);
  EXPECT_TRUE(out.truncated);
}

TEST(BoundedCaptureTest, TailKeepsTheLastBytesAcrossManyAppends) {
  BoundedCapture capture(5, OutputKeep::kTail);
  std::string all;
  for (int i = 0; i < 1000; ++i) {
    std::string piece = std::to_string(i);
    capture.Append(piece);
    all += piece;
  }
  CapturedOutput out = capture.Finish();
  EXPECT_EQ(out.text, all.substr(all.size() - 5));
  EXPECT_EQ(out.total_bytes, all.size());
  EXPECT_TRUE(out.truncated);
}

TEST(BoundedCaptureTest, HeadAndTailNamesWhatWasCut) {
  BoundedCapture capture(6, OutputKeep::kHeadAndTail);
  capture.Append("abcdefghijklmnop");  // 16 bytes: keep abc and nop.
  CapturedOutput out = capture.Finish();
  EXPECT_EQ(out.text, "abc\n[... 10 bytes cut ...]\nnop");
  EXPECT_TRUE(out.truncated);
}

TEST(BoundedCaptureTest, HeadAndTailExactlyAtTheCapIsWhole) {
  BoundedCapture capture(6, OutputKeep::kHeadAndTail);
  capture.Append("abcdef");
  CapturedOutput out = capture.Finish();
  EXPECT_EQ(out.text, "abcdef");
  EXPECT_FALSE(out.truncated);
}

TEST(BoundedCaptureTest, ZeroKeepsNothingButCounts) {
  BoundedCapture capture(0, OutputKeep::kHead);
  capture.Append("abc");
  CapturedOutput out = capture.Finish();
  EXPECT_EQ(out.text, "");
  EXPECT_EQ(out.total_bytes, 3u);
  EXPECT_TRUE(out.truncated);
}

std::vector<std::string> Split(size_t max_line,
                               const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  LineSplitter splitter(
      max_line, [&](std::string_view line) { lines.emplace_back(line); });
  for (const std::string& chunk : chunks) splitter.Feed(chunk);
  splitter.Flush();
  return lines;
}

TEST(LineSplitterTest, SplitsAcrossChunks) {
  EXPECT_EQ(Split(100, {"a\nb", "c\n", "\nd"}),
            (std::vector<std::string>{"a", "bc", "", "d"}));
}

TEST(LineSplitterTest, NoTrailingEmptyLineAfterFinalNewline) {
  EXPECT_EQ(Split(100, {"a\n"}), (std::vector<std::string>{"a"}));
}

TEST(LineSplitterTest, CutsOverLongLinesIntoPieces) {
  EXPECT_EQ(Split(3, {"abcdefg\nhi"}),
            (std::vector<std::string>{"abc", "def", "g", "hi"}));
  EXPECT_EQ(Split(3, {"ab", "c", "\n"}), (std::vector<std::string>{"abc"}));
}

}  // namespace
}  // namespace steps
