#include "core/duration.h"

#include <gtest/gtest.h>

namespace steps {
namespace {

Millis Parse(const char* s) {
  auto r = ParseDuration(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().message();
  return r.ok() ? *r : Millis(-999);
}

TEST(DurationTest, EveryUnit) {
  EXPECT_EQ(Parse("500ms"), Millis(500));
  EXPECT_EQ(Parse("30s"), Millis(30000));
  EXPECT_EQ(Parse("2m"), Millis(120000));
  EXPECT_EQ(Parse("1h"), Millis(3600000));
  EXPECT_EQ(Parse("1h30m"), Millis(5400000));
  EXPECT_EQ(Parse("1m30s500ms"), Millis(90500));
  EXPECT_EQ(Parse("0s"), Millis(0));
  EXPECT_EQ(Parse("0ms"), Millis(0));
}

TEST(DurationTest, NegativeParsesForCallerToRefuse) {
  EXPECT_EQ(Parse("-5s"), Millis(-5000));
}

TEST(DurationTest, RefusesMalformed) {
  for (const char* bad :
       {"", "s", "5", "5x", "1.5s", "30s2m", "5ss", "1h1h", "h", "ms5", " 5s",
        "5s ", "-", "99999999999999999h"}) {
    auto r = ParseDuration(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed";
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("500ms, 30s"), std::string::npos)
          << "the error shows the accepted forms";
    }
  }
}

TEST(DurationTest, BareIntegerTakesTheKeysUnit) {
  EXPECT_EQ(*ParseDurationWithUnit("30", Millis(1000)), Millis(30000));
  EXPECT_EQ(*ParseDurationWithUnit("250", Millis(1)), Millis(250));
  EXPECT_EQ(*ParseDurationWithUnit("0", Millis(1000)), Millis(0));
  EXPECT_EQ(*ParseDurationWithUnit("-3", Millis(1000)), Millis(-3000));
  EXPECT_EQ(*ParseDurationWithUnit("2m", Millis(1)), Millis(120000));
  EXPECT_FALSE(ParseDurationWithUnit("99999999999999999999", Millis(1)).ok());
}

TEST(DurationTest, FormatsShortestForm) {
  EXPECT_EQ(FormatDuration(Millis(0)), "0s");
  EXPECT_EQ(FormatDuration(Millis(250)), "250ms");
  EXPECT_EQ(FormatDuration(Millis(30000)), "30s");
  EXPECT_EQ(FormatDuration(Millis(5400000)), "1h30m");
  EXPECT_EQ(FormatDuration(Millis(61500)), "1m1.5s");
  EXPECT_EQ(FormatDuration(Millis(1250)), "1.25s");
  EXPECT_EQ(FormatDuration(Millis(-2000)), "-2s");
}

TEST(DurationTest, FormatParsesBackForWholeSeconds) {
  for (int64_t ms : {1000, 60000, 3600000, 3661000, 45 * 60000}) {
    EXPECT_EQ(Parse(FormatDuration(Millis(ms)).c_str()), Millis(ms));
  }
}

}  // namespace
}  // namespace steps
