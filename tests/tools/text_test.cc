#include "tools/text.h"

#include <gtest/gtest.h>

namespace steps {
namespace {

TEST(SanitizeUtf8Test, KeepsValidText) {
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(SanitizeUtf8Test, ReplacesEveryMalformedByte) {
  const std::string kFffd = "\xEF\xBF\xBD";
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);              // Overlong.
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // Surrogate.
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80").size(), 4 * kFffd.size());
  EXPECT_EQ(SanitizeUtf8("x\xE2\x82"), "x" + kFffd + kFffd);  // Truncated.
}

TEST(Utf8PrefixLengthTest, NeverSplitsACharacter) {
  std::string text =
      "a\xE2\x82\xAC"
      "b";  // a, euro sign, b.
  EXPECT_EQ(Utf8PrefixLength(text, 1), 1u);
  EXPECT_EQ(Utf8PrefixLength(text, 2), 1u);
  EXPECT_EQ(Utf8PrefixLength(text, 3), 1u);
  EXPECT_EQ(Utf8PrefixLength(text, 4), 4u);
  EXPECT_EQ(Utf8PrefixLength(text, 100), text.size());
}

TEST(DescribeSizeTest, Units) {
  EXPECT_EQ(DescribeSize(1), "1 byte");
  EXPECT_EQ(DescribeSize(500), "500 bytes");
  EXPECT_EQ(DescribeSize(65536), "64 KiB (65536 bytes)");
  EXPECT_EQ(DescribeSize(3 * 1024 * 1024), "3 MiB (3145728 bytes)");
}

}  // namespace
}  // namespace steps
