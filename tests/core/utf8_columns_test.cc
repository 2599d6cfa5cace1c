// Terminal columns of UTF-8 text, and cutting it to fit a width.
#include <gtest/gtest.h>

#include "core/utf8.h"

namespace steps {
namespace {

const std::string kE = "\xC3\xA9";          // é: two bytes, one column.
const std::string kZhong = "\xE4\xB8\xAD";  // 中: three bytes, two columns.
const std::string kAcute = "\xCC\x81";      // Combining acute: no column.
const std::string kEllipsis = "\xE2\x80\xA6";

TEST(TerminalColumnsTest, CountsColumnsNotBytes) {
  EXPECT_EQ(TerminalColumns(""), 0u);
  EXPECT_EQ(TerminalColumns("abc"), 3u);
  EXPECT_EQ(TerminalColumns(kE + kE), 2u);
  EXPECT_EQ(TerminalColumns(kZhong + "a"), 3u);
  EXPECT_EQ(TerminalColumns("e" + kAcute), 1u);
  EXPECT_EQ(TerminalColumns("\xF0\x9F\x98\x80"), 2u);  // An emoji.
  EXPECT_EQ(TerminalColumns("\xE2\x8F\xB5"), 1u);      // ⏵
  EXPECT_EQ(TerminalColumns("a\xFF"
                            "b"),
            3u);                               // Malformed byte.
  EXPECT_EQ(TerminalColumns("\xE4\xB8"), 2u);  // Cut sequence.
}

TEST(FitTerminalColumnsTest, KeepsTextThatFitsToTheLastColumn) {
  EXPECT_EQ(FitTerminalColumns("abcde", 5), "abcde");
  EXPECT_EQ(FitTerminalColumns("abcde", 6), "abcde");
  EXPECT_EQ(FitTerminalColumns(kZhong + kZhong, 4), kZhong + kZhong);
  EXPECT_EQ(FitTerminalColumns("", 0), "");
}

TEST(FitTerminalColumnsTest, CutsOneColumnOverWithAnEllipsis) {
  EXPECT_EQ(FitTerminalColumns("abcdef", 5), "abcd" + kEllipsis);
  EXPECT_EQ(TerminalColumns(FitTerminalColumns("abcdef", 5)), 5u);
  EXPECT_EQ(FitTerminalColumns("abc", 1), kEllipsis);
  EXPECT_EQ(FitTerminalColumns("abc", 0), "");
}

TEST(FitTerminalColumnsTest, NeverSplitsACharacter) {
  // é at the cut: whole or not at all.
  EXPECT_EQ(FitTerminalColumns("ab" + kE + kE + "cd", 4),
            "ab" + kE + kEllipsis);
  // A wide character that would straddle the edge is left out, and the
  // line comes out narrower rather than wider.
  std::string cut = FitTerminalColumns("abc" + kZhong + "de", 5);
  EXPECT_EQ(cut, "abc" + kEllipsis);
  EXPECT_LE(TerminalColumns(cut), 5u);
  // A combining mark stays with the letter it marks.
  EXPECT_EQ(FitTerminalColumns("ae" + kAcute + "bcd", 4),
            "ae" + kAcute + "b" + kEllipsis);
}

}  // namespace
}  // namespace steps
