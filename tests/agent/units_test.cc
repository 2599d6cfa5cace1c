// The engine's parts on their own: deadline texts and the nudge edge,
// guards, spending, context files and CLI transcripts.
#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/cli_source.h"
#include "agent/context_files.h"
#include "agent/deadline_notice.h"
#include "agent/guards.h"
#include "agent/spending.h"
#include "agent_test_util.h"

namespace steps::agent {
namespace {

using std::chrono::seconds;
using testing::TempDir;

const WallTime kSomeTime = std::chrono::system_clock::from_time_t(1800000000);

TEST(DeadlineNoticeTest, FormatsUtcToTheSecond) {
  EXPECT_EQ(FormatUtc(kSomeTime), "2027-01-15 08:00:00 UTC");
  EXPECT_EQ(FormatUtc(kSomeTime + Millis(999)), "2027-01-15 08:00:00 UTC");
}

TEST(DeadlineNoticeTest, DisclosureSaysHowLongAndWhenItEnds) {
  EXPECT_EQ(DisclosureText(std::chrono::minutes(10), kSomeTime),
            "Deadline: you have 10m for this whole task, tool calls "
            "included; it ends at 2027-01-15 08:00:00 UTC. Give your final "
            "answer before then: at the deadline the conversation is cut off "
            "without an answer.");
}

TEST(DeadlineNoticeTest, NudgeShowsWholeSecondsLeft) {
  EXPECT_EQ(NudgeText(Millis(19999), seconds(100)),
            "Time is almost up: less than a fifth of your 1m40s deadline is "
            "left (about 19s). Wrap up now: finish what you are doing and "
            "give your final answer.");
  EXPECT_NE(NudgeText(Millis(250), seconds(1)).find("(about 250ms)"),
            std::string::npos);
}

TEST(DeadlineNoticeTest, NudgeIsDueOnlyUnderAFifth) {
  SteadyTime end = SteadyTime() + seconds(1000);
  Millis timeout = seconds(100);
  EXPECT_FALSE(NudgeDue(end - seconds(21), end, timeout));
  EXPECT_FALSE(NudgeDue(end - seconds(20), end, timeout));  // Exactly 1/5.
  EXPECT_TRUE(
      NudgeDue(end - seconds(20) + std::chrono::nanoseconds(1), end, timeout));
  EXPECT_TRUE(NudgeDue(end, end, timeout));
  // A timeout that does not divide by five: 5 * left < 7 ms.
  EXPECT_FALSE(NudgeDue(end - std::chrono::microseconds(1400), end, Millis(7)));
  EXPECT_TRUE(NudgeDue(end - std::chrono::microseconds(1399), end, Millis(7)));
}

TEST(LoopGuardTest, ThreeIdenticalCallsInARow) {
  LoopGuard guard;
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"a"})", "x"));
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"a"})", "x"));
  EXPECT_TRUE(guard.Record("read_file", R"({"path":"a"})", "x"));
  EXPECT_EQ(guard.repeats(), 3);
}

TEST(LoopGuardTest, AnyDifferenceStartsANewRun) {
  LoopGuard guard;
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"a"})", "x"));
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"a"})", "x"));
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"a"})", "y"));  // Result.
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"a"})", "y"));
  EXPECT_FALSE(guard.Record("read_file", R"({"path":"b"})", "y"));   // Args.
  EXPECT_FALSE(guard.Record("list_files", R"({"path":"b"})", "y"));  // Name.
  EXPECT_FALSE(guard.Record("list_files", R"({"path":"b"})", "y"));
  EXPECT_EQ(guard.repeats(), 2);
  // Framing: moving a byte between fields is a different call.
  LoopGuard framed;
  EXPECT_FALSE(framed.Record("ab", "c", "r"));
  EXPECT_FALSE(framed.Record("a", "bc", "r"));
  EXPECT_FALSE(framed.Record("ab", "c", "r"));
}

TEST(TextAnswerGuardTest, FiveTextAnswersInARow) {
  TextAnswerGuard guard;
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(guard.RecordText());
  guard.RecordToolCall();
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(guard.RecordText());
  EXPECT_TRUE(guard.RecordText());
  EXPECT_EQ(guard.streak(), 5);
}

TEST(BudgetMeterTest, ExactlySpentIsSpentButNotExceeded) {
  BudgetMeter meter(BudgetLimit{100, std::nullopt}, "job");
  EXPECT_TRUE(meter.Add(60, 0));
  EXPECT_FALSE(meter.Spent());
  EXPECT_TRUE(meter.Add(40, 0));
  EXPECT_TRUE(meter.Spent());
  EXPECT_FALSE(meter.Exceeded());
  EXPECT_EQ(meter.DescribeSpent(), "token budget of 100 spent (100 used)");
  EXPECT_FALSE(meter.Add(1, 0));
  EXPECT_EQ(meter.Describe(), "token budget of 100 exceeded (101 used)");
}

// A budget others charge out of the meter's sight: spent once they say
// so, in their words, and for good; the meter's own counts stay its own.
TEST(BudgetMeterTest, SpentElsewhereIsSpentInItsWords) {
  BudgetMeter meter(BudgetLimit{100, std::nullopt}, "job");
  int asked = 0;
  std::optional<std::string> elsewhere;
  meter.SetSpentElsewhere([&]() {
    ++asked;
    return elsewhere;
  });
  EXPECT_TRUE(meter.Add(10, 0));
  EXPECT_FALSE(meter.Spent());
  EXPECT_EQ(meter.DescribeSpent(), "");
  elsewhere = "token budget of 100 spent (130 used), counting other nodes";
  EXPECT_TRUE(meter.Spent());
  EXPECT_EQ(meter.DescribeSpent(),
            "token budget of 100 spent (130 used), counting other nodes");
  EXPECT_FALSE(meter.Exceeded());
  EXPECT_EQ(meter.tokens(), 10);
  elsewhere.reset();
  EXPECT_TRUE(meter.Spent());  // Once spent, for good: not asked again.
  EXPECT_EQ(asked, 2);
  // Its own spending speaks first.
  EXPECT_FALSE(meter.Add(95, 0));
  EXPECT_EQ(meter.DescribeSpent(), "token budget of 100 spent (105 used)");
}

TEST(BudgetMeterTest, ZeroCapsMeanNoCap) {
  BudgetMeter meter(BudgetLimit{0, 0.0});
  EXPECT_TRUE(meter.Add(1000000, 1000));
  EXPECT_FALSE(meter.Spent());
  EXPECT_EQ(meter.DescribeSpent(), "");
}

TEST(SpendingTest, ChargesOwnAndSharedBudgetsAndNamesTheOneExceeded) {
  auto job =
      std::make_shared<BudgetMeter>(BudgetLimit{50, std::nullopt}, "job");
  Spending spending(BudgetLimit{100, std::nullopt}, {job});
  EXPECT_EQ(spending.Charge(50, 0), "");
  EXPECT_EQ(spending.Spent(), "job budget: token budget of 50 spent (50 used)");
  EXPECT_EQ(spending.Charge(1, 0),
            "job budget: token budget of 50 exceeded (51 used)");
  EXPECT_EQ(job->tokens(), 51);

  Spending own(BudgetLimit{std::nullopt, 0.5}, {});
  EXPECT_EQ(own.Charge(10, 0.75),
            "step budget: USD budget of $0.5 exceeded "
            "($0.75 spent)");
}

TEST(SpendingTest, UsdFromPriceElseReportedCost) {
  Usage usage;
  usage.prompt_tokens = 1000;
  usage.completion_tokens = 500;
  usage.cost_usd = 9.0;
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, SourcePrice{2.0, 10.0}),
                   (1000 * 2.0 + 500 * 10.0) / 1e6);
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, std::nullopt), 9.0);
  usage.cost_usd.reset();
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, std::nullopt), 0.0);
}

// price: > the provider's reported cost > the prices table > nothing.
TEST(SpendingTest, ThePricesTableComesLast) {
  Usage usage;
  usage.prompt_tokens = 1000;
  usage.completion_tokens = 500;
  const SourcePrice listed{1.0, 4.0};
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, std::nullopt, listed),
                   (1000 * 1.0 + 500 * 4.0) / 1e6);
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, SourcePrice{2.0, 10.0}, listed),
                   (1000 * 2.0 + 500 * 10.0) / 1e6);
  usage.cost_usd = 0.0;  // Reported as free: free, whatever the table says.
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, std::nullopt, listed), 0.0);
  usage.cost_usd = 0.25;
  EXPECT_DOUBLE_EQ(AnswerUsd(usage, std::nullopt, listed), 0.25);
}

TEST(ContextFilesTest, WholeWhenUnbounded) {
  TempDir dir;
  dir.Write("a.txt", "alpha");
  dir.Write("b.txt", std::string(5000, 'b'));
  for (std::optional<int64_t> bound :
       {std::optional<int64_t>(), std::optional<int64_t>(0)}) {
    auto messages = ReadContextFiles({"a.txt", "b.txt"}, dir.path(), bound);
    ASSERT_TRUE(messages.ok()) << messages.status().message();
    ASSERT_EQ(messages->size(), 2u);
    EXPECT_EQ((*messages)[0], "Context file: a.txt (5 bytes)\n\nalpha");
    EXPECT_EQ((*messages)[1],
              "Context file: b.txt (5000 bytes)\n\n" + std::string(5000, 'b'));
  }
}

TEST(ContextFilesTest, BoundedTogetherAndACutFileSaysSo) {
  TempDir dir;
  dir.Write("a.txt", "alpha");
  dir.Write("b.txt", "0123456789");
  dir.Write("c.txt", "never");
  auto messages = ReadContextFiles({"a.txt", "b.txt", "c.txt"}, dir.path(), 8);
  ASSERT_TRUE(messages.ok());
  ASSERT_EQ(messages->size(), 3u);
  EXPECT_EQ((*messages)[0], "Context file: a.txt (5 bytes)\n\nalpha");
  EXPECT_EQ((*messages)[1],
            "Context file: b.txt (10 bytes; cut: the first 3 of 10 bytes are "
            "shown; max_context_bytes is 8)\n\n012");
  EXPECT_EQ((*messages)[2],
            "Context file: c.txt (5 bytes; not shown: max_context_bytes (8) "
            "is used up by the files before it)");
}

TEST(ContextFilesTest, ExactFitIsNotCut) {
  TempDir dir;
  dir.Write("a.txt", "alpha");
  auto messages = ReadContextFiles({"a.txt"}, dir.path(), 5);
  ASSERT_TRUE(messages.ok());
  EXPECT_EQ((*messages)[0], "Context file: a.txt (5 bytes)\n\nalpha");
}

TEST(ContextFilesTest, CutsOnACharacterBoundary) {
  TempDir dir;
  dir.Write("u.txt", "ab\xC3\xA9z");  // "abéz": é is two bytes.
  auto messages = ReadContextFiles({"u.txt"}, dir.path(), 3);
  ASSERT_TRUE(messages.ok());
  EXPECT_EQ((*messages)[0],
            "Context file: u.txt (5 bytes; cut: the first 2 of 5 bytes are "
            "shown; max_context_bytes is 3)\n\nab");
}

TEST(ContextFilesTest, BinaryIsNamedNotShownAndMissingIsAnError) {
  TempDir dir;
  dir.Write("bin", std::string("a\0b", 3));
  auto messages = ReadContextFiles({"bin"}, dir.path(), std::nullopt);
  ASSERT_TRUE(messages.ok());
  EXPECT_EQ((*messages)[0], "Context file: bin (3 bytes; binary, not shown)");
  auto missing = ReadContextFiles({"nope.txt"}, dir.path(), std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "context_paths: nope.txt: no such file");
}

TEST(CliTranscriptTest, RendersEveryMessage) {
  std::vector<Message> messages = {
      Message::System("Be brief."), Message::User("Fix it."),
      Message::Assistant("", {{"c1", "read_file", R"({"path":"a"})"}}),
      Message::ToolResult("c1", "contents", "read_file")};
  EXPECT_EQ(RenderTranscript(messages),
            "## system\n\nBe brief.\n\n## user\n\nFix it.\n\n## assistant\n\n"
            "\n[tool call] read_file {\"path\":\"a\"}\n\n## tool (read_file)"
            "\n\ncontents\n");
}

}  // namespace
}  // namespace steps::agent
