// The Redactor: which values it masks and how, and log lines through it.
#include "core/redact.h"

#include <gtest/gtest.h>

#include "core/log.h"

namespace steps {
namespace {

TEST(RedactorTest, MasksEveryOccurrence) {
  Redactor r({"sk-SECRET-1"});
  EXPECT_EQ(r.Redact("key sk-SECRET-1, again sk-SECRET-1."),
            "key ***, again ***.");
  EXPECT_TRUE(r.Contains("xsk-SECRET-1x"));
  EXPECT_FALSE(r.Contains("sk-SECRET-"));
  EXPECT_EQ(r.Redact("nothing here"), "nothing here");
}

TEST(RedactorTest, ShortAndEmptyValuesAreNotSecrets) {
  // Below kMinSecretBytes a value would mask ordinary text everywhere.
  Redactor r({"", "a", "on", "abc"});
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.Redact("a cat on abc"), "a cat on abc");
  Redactor four({"abcd"});
  EXPECT_EQ(four.Redact("xabcdx"), "x***x");
}

TEST(RedactorTest, OverlappingSecretsLeaveNothingBehind) {
  // One secret inside another, and two that overlap: one mask each time.
  Redactor r({"TOKEN", "MY-TOKEN-LONG", "LONGER"});
  EXPECT_EQ(r.Redact("[MY-TOKEN-LONGER]"), "[***]");
  EXPECT_EQ(r.Redact("TOKEN TOKEN"), "*** ***");
  // Adjacent, not overlapping: each is masked.
  EXPECT_EQ(r.Redact("TOKENTOKEN"), "******");
}

TEST(RedactorTest, MultiLineSecretsAreMaskedLineByLine) {
  Redactor r({"-----BEGIN KEY-----\nAAAABBBBCCCC\nxy\n-----END KEY-----"});
  EXPECT_EQ(r.Redact("AAAABBBBCCCC"), "***");
  // A line shorter than the minimum is not masked on its own.
  EXPECT_EQ(r.Redact("xy"), "xy");
  EXPECT_EQ(
      r.Redact("-----BEGIN KEY-----\nAAAABBBBCCCC\nxy\n-----END KEY-----"),
      "***");
}

TEST(RedactorTest, ProcessRedactorGrowsAndLogLinesAreMasked) {
  const std::string secret = "s3cr\"et\\value-for-log";
  AddProcessSecrets({secret});
  AddProcessSecrets({"another-secret"});
  EXPECT_TRUE(ProcessRedactor()->Contains(secret));
  EXPECT_TRUE(ProcessRedactor()->Contains("another-secret"));
  EXPECT_EQ(RedactSecrets("a " + secret + " b"), "a *** b");
  // Masked before quoting: the escaped form would no longer match.
  std::string line =
      FormatLogEvent(LogLevel::kWarn, "agent.conversation_failed",
                     {{"agent", "a"}, {"error", "401: bad key " + secret}});
  EXPECT_EQ(line,
            "WRN agent.conversation_failed agent=a error=\"401: bad key ***\"");
}

}  // namespace
}  // namespace steps
