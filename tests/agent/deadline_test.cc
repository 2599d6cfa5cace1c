// The one deadline, on a fake clock: the disclosure, the nudge at its exact
// edge and only once, a deadline shared by a hanging primary and its
// fallback, and backoff waits clipped by the deadline. The in-process mock
// waits on the same clock, so every time below is exact.
#include <gtest/gtest.h>

#include "agent/conversation.h"
#include "agent/deadline_notice.h"
#include "agent/resume.h"
#include "agent_test_util.h"

namespace steps::agent {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::CountContaining;
using testing::FixedBackoff;
using testing::Invocation;
using testing::LogCapture;
using testing::MockRunner;
using testing::MockSource;
using testing::RequestMessages;

constexpr char kNudgeMark[] = "Time is almost up";

TEST(DisclosureTest, SystemMessageStatesTheDeadlineOnceUpFront) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - call: {name: read_file, arguments: {path: a.txt}}
  - say: done
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.persona = "You review code.";
  inv.tools = {"read_file"};
  inv.timeout = minutes(10);
  AgentContext ctx;
  ctx.clock = &clock;
  const WallTime ends = clock.WallNow() + minutes(10);

  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_TRUE(r.deadline_disclosed);
  EXPECT_FALSE(r.nudge_sent);

  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 2u);
  const std::string expected =
      "You review code.\n\nDeadline: you have 10m for this whole task, tool "
      "calls included; it ends at " +
      FormatUtc(ends) +
      ". Give your final answer before then: at the deadline the "
      "conversation is cut off without an answer.";
  for (const auto& request : requests) {
    auto messages = RequestMessages(request);
    EXPECT_EQ(messages[0]["role"], "system");
    EXPECT_EQ(messages[0]["content"], expected);
    EXPECT_EQ(CountContaining(request, "Deadline: you have"), 1);
  }
}

TEST(DisclosureTest, NoDeadlineDisclosesNothingAndNeverNudges) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {delay: 5h, call: {name: read_file, arguments: {path: a.txt}}}
  - say: done
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.persona = "You review code.";
  inv.tools = {"read_file"};
  inv.timeout = std::nullopt;  // timeout: "0"
  AgentContext ctx;
  ctx.clock = &clock;

  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_FALSE(r.deadline_disclosed);
  EXPECT_FALSE(r.nudge_sent);
  for (const auto& request : runner->MockRequests()) {
    EXPECT_EQ(RequestMessages(request)[0]["content"], "You review code.");
    EXPECT_EQ(CountContaining(request, "Deadline"), 0);
    EXPECT_EQ(CountContaining(request, kNudgeMark), 0);
  }
}

TEST(DisclosureTest, NoPersonaAndNoDeadlineSendsNoSystemMessage) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner("w: [{say: done}]");
  AgentInvocation inv = Invocation({MockSource("w")});
  AgentContext ctx;
  ctx.clock = &clock;
  ASSERT_EQ(runner->Run(inv, ctx).outcome, Outcome::kSucceeded);
  auto messages = RequestMessages(runner->MockRequests().at(0));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]["role"], "user");
}

// Timeout 100s: the nudge is due once less than 20s remain. Request 3 is
// sent with exactly 20s left (not nudged); request 4 with 19.999s left
// (nudged); request 5 carries that one nudge and no second one.
TEST(NudgeTest, RidesOnTheFirstRequestUnderAFifthAndOnlyOnce) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {delay: 79s, call: {name: read_file, arguments: {path: a.txt}}}
  - {delay: 1s, call: {name: read_file, arguments: {path: b.txt}}}
  - {delay: 1ms, call: {name: read_file, arguments: {path: c.txt}}}
  - call: {name: read_file, arguments: {path: d.txt}}
  - say: wrapped up
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.tools = {"read_file"};
  inv.timeout = seconds(100);
  AgentContext ctx;
  ctx.clock = &clock;
  LogCapture logs;

  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "wrapped up");
  EXPECT_TRUE(r.nudge_sent);
  EXPECT_EQ(r.turns, 5);  // The nudge costs no turn.

  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 5u);
  EXPECT_EQ(CountContaining(requests[0], kNudgeMark), 0);
  EXPECT_EQ(CountContaining(requests[1], kNudgeMark), 0);  // 21s left.
  EXPECT_EQ(CountContaining(requests[2], kNudgeMark), 0);  // Exactly 20s.
  EXPECT_EQ(CountContaining(requests[3], kNudgeMark), 1);  // 19.999s.
  EXPECT_EQ(CountContaining(requests[4], kNudgeMark), 1);  // Not resent.

  // A plain user message, last on its request, and the tools stay granted.
  auto messages = RequestMessages(requests[3]);
  EXPECT_EQ(messages.back()["role"], "user");
  EXPECT_EQ(messages.back()["content"], NudgeText(Millis(19999), seconds(100)));
  auto body = nlohmann::json::parse(requests[3].body);
  ASSERT_TRUE(body.contains("tools"));
  EXPECT_EQ(body["tools"].size(), 1u);
  EXPECT_EQ(logs.LinesWith("agent.nudge").size(), 1u);
}

// A run killed after its nudged request was stored: the resumed
// conversation re-sends that request (the nudge in it, once) and nudges
// no more, though a fifth of its deadline still remains only.
TEST(NudgeTest, AResumedConversationIsNotNudgedTwice) {
  FakeClock clock(/*auto_advance=*/true);
  auto first = MockRunner(R"(
w:
  - {delay: 81s, call: {name: read_file, arguments: {path: a.txt}}}
  - say: done
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.tools = {"read_file"};
  inv.timeout = seconds(100);
  AgentContext ctx;
  ctx.clock = &clock;
  std::vector<ConversationCheckpoint> kept;
  ctx.events.on_checkpoints =
      [&](const std::vector<ConversationCheckpoint>& batch) {
        for (const ConversationCheckpoint& cp : batch) {
          if (kept.size() < 5) kept.push_back(cp);  // Through the 2nd request.
        }
      };
  ASSERT_EQ(first->Run(inv, ctx).outcome, Outcome::kSucceeded);
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_FALSE(kept[0].nudge);
  EXPECT_TRUE(kept[4].nudge);  // 19s of 100s left when it was sent.

  auto second = MockRunner(R"(
w:
  - {delay: 1s, call: {name: read_file, arguments: {path: b.txt}}}
  - say: done
)");
  AgentInvocation resumed = inv;
  resumed.timeout = seconds(19);  // What is left of the whole 100s.
  resumed.whole_timeout = seconds(100);
  resumed.resume_from = RebuildConversation(kept);
  EXPECT_TRUE(resumed.resume_from->nudged);
  AgentContext ctx2;
  ctx2.clock = &clock;
  AgentResult r = second->Run(resumed, ctx2);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  auto requests = second->MockRequests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(CountContaining(requests[0], kNudgeMark), 1);  // As stored.
  EXPECT_EQ(CountContaining(requests[1], kNudgeMark), 1);  // Not a second.
}

// A resumed step has what is left of its timeout; the nudge is due at a
// fifth of the whole timeout and says the whole, not at a fifth of the
// rest.
TEST(NudgeTest, AResumedStepIsNudgedAtAFifthOfItsWholeTimeout) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {delay: 10s, call: {name: read_file, arguments: {path: a.txt}}}
  - {delay: 1ms, call: {name: read_file, arguments: {path: b.txt}}}
  - say: done
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.tools = {"read_file"};
  inv.timeout = seconds(30);  // Left of 100s: 20s left after 10s.
  inv.whole_timeout = seconds(100);
  AgentContext ctx;
  ctx.clock = &clock;
  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(CountContaining(requests[0], kNudgeMark), 0);  // 30s of 100s.
  EXPECT_EQ(CountContaining(requests[1], kNudgeMark), 0);  // Exactly 20s.
  EXPECT_EQ(CountContaining(requests[2], kNudgeMark), 1);  // 19.999s.
  auto messages = RequestMessages(requests[2]);
  EXPECT_EQ(messages.back()["content"],
            NudgeText(Millis(19999), seconds(100)));
}

TEST(NudgeTest, NotSentWhenTheConversationEndsBeforeTheLastFifth) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {delay: 80s, call: {name: read_file, arguments: {path: a.txt}}}
  - say: done
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.tools = {"read_file"};
  inv.timeout = seconds(100);
  AgentContext ctx;
  ctx.clock = &clock;
  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_FALSE(r.nudge_sent);
}

TEST(DeadlineTest, ExpiryFailsWithTheExactErrorAndIsNeverRetried) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - call: {name: read_file, arguments: {path: a.txt}}
  - hang: true
  - say: too late
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.tools = {"read_file"};
  inv.timeout = minutes(1);
  inv.attempts = 3;
  AgentContext ctx;
  ctx.clock = &clock;
  const SteadyTime start = clock.Now();
  LogCapture logs;

  AgentResult r = runner->Run(inv, ctx);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, "agent: generate content: context deadline exceeded");
  EXPECT_EQ(clock.Now() - start, minutes(1));
  EXPECT_EQ(runner->MockRequests().size(), 2u);  // The hang was not re-sent.
  EXPECT_EQ(r.provider_requests, 2);
  EXPECT_EQ(r.turns, 1);  // What was done is kept.
  EXPECT_TRUE(logs.LinesWith("agent.request_retry").empty());
  ASSERT_EQ(logs.LinesWith("agent.conversation_failed").size(), 1u);
  EXPECT_EQ(logs.LinesWith("agent.conversation_failed")[0],
            "WRN agent.conversation_failed agent=tester provider_requests=2 "
            "error=\"agent: generate content: context deadline exceeded\"");
}

// The caller's deadline is the conversation's: time spent before the
// conversation starts (its step's records, MCP servers starting) is off
// it, and the disclosure names that end, not one from the conversation's
// own start.
TEST(DeadlineTest, TheCallersDeadlineIsTheConversations) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {delay: 80s, say: too late}
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.timeout = seconds(100);
  inv.deadline = clock.Now() + seconds(100);
  const WallTime ends = clock.WallNow() + seconds(100);
  clock.Advance(seconds(30));  // The step's start, before the conversation.
  AgentContext ctx;
  ctx.clock = &clock;

  AgentResult r = runner->Run(inv, ctx);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, "agent: generate content: context deadline exceeded");
  EXPECT_EQ(*inv.deadline, clock.Now());
  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(CountContaining(requests[0], "it ends at " + FormatUtc(ends)), 1);
}

// A durable point whose store waited past the deadline (another process
// held it): what it guarded does not happen. No request is sent after a
// request's checkpoint stored too late, and no tool with effects runs
// after its start's.
TEST(DeadlineTest, NothingHappensAfterACheckpointStoredPastTheDeadline) {
  for (const bool at_tool : {false, true}) {
    SCOPED_TRACE(at_tool ? "a tool's start" : "a request");
    FakeClock clock(/*auto_advance=*/true);
    auto runner = MockRunner(R"(
w:
  - call: {name: write_file, arguments: {path: late.txt, content: x}}
  - say: done
)");
    testing::TempDir dir;
    AgentInvocation inv = Invocation({MockSource("w")});
    inv.tools = {"write_file"};
    inv.working_dir = dir.path();
    inv.timeout = minutes(1);
    AgentContext ctx;
    ctx.clock = &clock;
    int points = 0;
    ctx.events.on_checkpoints =
        [&](const std::vector<ConversationCheckpoint>& batch) {
          // The 1st durable point is the first request; the 2nd, the
          // call's start; the 3rd, the second request.
          if (++points == (at_tool ? 2 : 3)) clock.Advance(minutes(2));
          (void)batch;
        };

    AgentResult r = runner->Run(inv, ctx);
    EXPECT_EQ(r.outcome, Outcome::kFailed);
    EXPECT_EQ(r.error, "agent: generate content: context deadline exceeded");
    EXPECT_EQ(runner->MockRequests().size(), 1u);
    EXPECT_EQ(std::filesystem::exists(dir.path() + "/late.txt"), !at_tool);
  }
}

// Timeout 10m, llm_timeout 4m, two attempts: the primary hangs 4m, waits
// 1s, hangs 4m again, and the fallback gets what is left (1m59s), not a
// fresh 10m. The step ends at exactly 10m.
TEST(DeadlineTest, SharedByAHangingPrimaryAndItsFallback) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
primary:
  - hang: true
  - hang: true
fallback:
  - hang: true
)");
  AgentInvocation inv =
      Invocation({MockSource("primary"), MockSource("fallback")});
  inv.timeout = minutes(10);
  inv.llm_timeout = minutes(4);
  inv.attempts = 2;
  AgentContext ctx;
  ctx.clock = &clock;
  const SteadyTime start = clock.Now();
  LogCapture logs;

  AgentResult r = runner->Run(inv, ctx);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
  EXPECT_EQ(clock.Now() - start, minutes(10));
  EXPECT_EQ(clock.total_slept(), minutes(10));
  EXPECT_EQ(r.fallbacks_taken, std::vector<std::string>{"mock/fallback"});
  EXPECT_EQ(r.provider_requests, 3);

  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].model, "primary");
  EXPECT_EQ(requests[2].model, "fallback");
  // The fallback carries the same conversation on; with 1m59s of 10m left
  // it is also the first request under a fifth, so the nudge rides on it.
  auto carried = RequestMessages(requests[0]);
  carried.push_back(
      {{"role", "user"}, {"content", NudgeText(Millis(119000), minutes(10))}});
  EXPECT_EQ(RequestMessages(requests[2]), carried);
  EXPECT_TRUE(r.nudge_sent);
  auto cascade = logs.LinesWith("agent.fallback");
  ASSERT_EQ(cascade.size(), 1u);
  EXPECT_EQ(cascade[0].rfind("WRN agent.fallback agent=tester "
                             "from=mock/primary to=mock/fallback error=",
                             0),
            0u)
      << cascade[0];
}

TEST(DeadlineTest, APrimaryHangingWithoutLlmTimeoutSpendsItAll) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
primary: [{hang: true}]
fallback: [{say: never asked}]
)");
  AgentInvocation inv =
      Invocation({MockSource("primary"), MockSource("fallback")});
  inv.timeout = minutes(10);
  AgentContext ctx;
  ctx.clock = &clock;
  const SteadyTime start = clock.Now();
  AgentResult r = runner->Run(inv, ctx);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
  EXPECT_EQ(clock.Now() - start, minutes(10));
  EXPECT_TRUE(r.fallbacks_taken.empty());
  EXPECT_EQ(runner->MockRequests().size(), 1u);
}

// Backoff 4s then 8s; the deadline is 10s away. The first wait fits, the
// second (8s, with 6s left) is not started: the source gives up at once.
TEST(BackoffTest, AWaitPastTheDeadlineIsNotStarted) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - status: 500
  - status: 500
  - say: never reached
)",
                           FixedBackoff(seconds(4)));
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.timeout = seconds(10);
  inv.attempts = 3;
  AgentContext ctx;
  ctx.clock = &clock;
  const SteadyTime start = clock.Now();
  LogCapture logs;

  AgentResult r = runner->Run(inv, ctx);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_NE(r.error.find("not retried: the backoff is 8s but the deadline is "
                         "6s away"),
            std::string::npos)
      << r.error;
  EXPECT_EQ(clock.Now() - start, seconds(4));
  EXPECT_EQ(clock.total_slept(), seconds(4));
  EXPECT_EQ(runner->MockRequests().size(), 2u);
  EXPECT_EQ(logs.LinesWith("agent.request_retry").size(), 1u);
}

TEST(BackoffTest, AClippedSourceHandsTheRestOfTheDeadlineToItsFallback) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
primary:
  - status: 503
  - status: 503
fallback:
  - {delay: 5s, say: done in time}
)",
                           FixedBackoff(seconds(4)));
  AgentInvocation inv =
      Invocation({MockSource("primary"), MockSource("fallback")});
  inv.timeout = seconds(10);
  inv.attempts = 3;
  AgentContext ctx;
  ctx.clock = &clock;
  const SteadyTime start = clock.Now();
  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "done in time");
  EXPECT_EQ(clock.Now() - start, seconds(9));
}

TEST(BackoffTest, ARetryAfterPastTheDeadlineIsNotWaited) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {status: 429, headers: {Retry-After: "3600"}}
  - say: never reached
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.timeout = minutes(30);
  inv.attempts = 3;
  AgentContext ctx;
  ctx.clock = &clock;
  const SteadyTime start = clock.Now();
  AgentResult r = runner->Run(inv, ctx);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_NE(r.error.find("the server asked to wait 1h"), std::string::npos)
      << r.error;
  EXPECT_EQ(clock.Now() - start, Millis(0));
}

TEST(BackoffTest, AWaitThatFitsIsWaitedOnTheClock) {
  FakeClock clock(/*auto_advance=*/true);
  auto runner = MockRunner(R"(
w:
  - {status: 429, headers: {Retry-After: "120"}}
  - say: after the wait
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.timeout = minutes(30);
  inv.attempts = 2;
  AgentContext ctx;
  ctx.clock = &clock;
  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(clock.total_slept(), seconds(120));
}

}  // namespace
}  // namespace steps::agent
