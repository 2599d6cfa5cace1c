// How a conversation ends: succeeded, failed (deadline, turns, budget,
// guards), errored (a source that only answered 5xx or connection errors
// until its attempts ran out, with no fallback left) or aborted
// (cancellation), with the log lines the spec shows.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "agent/conversation.h"
#include "agent_test_util.h"

namespace steps::agent {
namespace {

using testing::Invocation;
using testing::LogCapture;
using testing::MockRunner;
using testing::MockSource;

class ClassificationTest : public ::testing::Test {
 protected:
  ClassificationTest() { ctx_.clock = &clock_; }
  FakeClock clock_{/*auto_advance=*/true};
  AgentContext ctx_;
};

// The spec's outage example: attempts: 1, the single request is a 500.
TEST_F(ClassificationTest, AnOutageWithOneAttemptIsErrored) {
  auto runner = MockRunner("reviewer: [{status: 500}]");
  AgentInvocation inv = Invocation({MockSource("qwen3.7-flash")});
  inv.agent_name = "reviewer";
  inv.messages = {"Review the PR."};
  inv.attempts = 1;
  LogCapture logs;
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_EQ(r.error.rfind("agent: generate content: gave up after 1 request: "
                          "HTTP 500",
                          0),
            0u)
      << r.error;
  EXPECT_EQ(r.provider_requests, 1);
  EXPECT_TRUE(logs.LinesWith("agent.request_retry").empty());
  EXPECT_EQ(logs.LinesWith("agent.conversation_failed").size(), 1u);
}

// The spec's log excerpt, line for line.
TEST_F(ClassificationTest, EveryRetryIsLoggedAndTheFailureReportsItsCost) {
  auto runner = MockRunner(R"(
coder:
  - status: 500
  - status: 500
  - status: 500
)");
  AgentInvocation inv = Invocation({MockSource("deepseek-v4-pro")});
  inv.agent_name = "coder";
  inv.attempts = 3;
  LogCapture logs;
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_EQ(r.provider_requests, 3);
  auto lines = logs.lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "WRN agent.request_retry agent=coder model=deepseek-v4-pro "
            "attempt=1 attempts=3 status=500");
  EXPECT_EQ(lines[1],
            "WRN agent.request_retry agent=coder model=deepseek-v4-pro "
            "attempt=2 attempts=3 status=500");
  EXPECT_EQ(lines[2].rfind("WRN agent.conversation_failed agent=coder "
                           "provider_requests=3 error=\"agent: generate "
                           "content: gave up after 3 requests: HTTP 500",
                           0),
            0u)
      << lines[2];
}

TEST_F(ClassificationTest, ConnectionErrorsUntilAttemptsRunOutAreErrored) {
  auto runner = MockRunner(R"(
w:
  - drop: true
  - garbage: true
)");
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.attempts = 2;
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_EQ(r.provider_requests, 2);
}

TEST_F(ClassificationTest, AnOutageWithAHealthyFallbackSucceeds) {
  auto runner = MockRunner(R"(
primary: [{status: 503}, {status: 503}]
fallback: [{say: fine}]
)");
  AgentInvocation inv =
      Invocation({MockSource("primary"), MockSource("fallback")});
  inv.attempts = 2;
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.provider_requests, 3);
}

TEST_F(ClassificationTest, CapsGuardsAndTheDeadlineAreFailures) {
  struct Case {
    const char* name;
    const char* script;
    std::function<void(AgentInvocation&)> dial;
  };
  std::vector<Case> cases = {
      {"deadline", "w: [{hang: true}]",
       [](AgentInvocation& i) { i.timeout = Millis(1000); }},
      {"turns", "w: [{call: {name: list_files, arguments: {path: a}}}]",
       [](AgentInvocation& i) { i.max_turns = 1; }},
      {"budget", "w: [{say: x, usage: {prompt_tokens: 5}}]",
       [](AgentInvocation& i) {
         i.budget = BudgetLimit{4, std::nullopt};
       }},
      {"loop", R"(
w:
  - call: {name: list_files, arguments: {path: a}}
  - call: {name: list_files, arguments: {path: a}}
  - call: {name: list_files, arguments: {path: a}}
)",
       [](AgentInvocation&) {}},
      {"text", "default: {say: words}",
       [](AgentInvocation& i) { i.required_tools = true; }},
  };
  for (const Case& c : cases) {
    auto runner = MockRunner(c.script);
    AgentInvocation inv = Invocation({MockSource("w")});
    inv.tools = {"list_files"};
    c.dial(inv);
    AgentResult r = runner->Run(inv, ctx_);
    EXPECT_EQ(r.outcome, Outcome::kFailed) << c.name << ": " << r.error;
    EXPECT_FALSE(r.error.empty()) << c.name;
  }
}

TEST_F(ClassificationTest, CancellationBeforeTheStartIsAborted) {
  auto runner = MockRunner("w: [{say: never}]");
  ctx_.cancel.Cancel(CancelReason::kAbort);
  LogCapture logs;
  AgentResult r = runner->Run(Invocation({MockSource("w")}), ctx_);
  EXPECT_EQ(r.outcome, Outcome::kAborted);
  EXPECT_EQ(r.error, "agent: cancelled");
  EXPECT_TRUE(runner->MockRequests().empty());
  EXPECT_TRUE(logs.LinesWith("agent.conversation_failed").empty());
}

TEST_F(ClassificationTest, CancellationBetweenTurnsIsAbortedAndKeepsTheWork) {
  auto runner = MockRunner(R"(
w:
  - {say: working, call: {name: list_files, arguments: {path: "."}}}
  - say: never
)");
  ctx_.events.on_turn = [this](const AgentTurnRecord&) {
    ctx_.cancel.Cancel(CancelReason::kAbort);
  };
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.tools = {"list_files"};
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kAborted);
  EXPECT_EQ(r.turns, 1);
  EXPECT_EQ(r.answer, "working");
  EXPECT_EQ(runner->MockRequests().size(), 1u);
}

// A request in flight is cut by the cancel token; the wait is on a clock
// without auto-advance, so only the cancel can end it.
TEST_F(ClassificationTest, CancellationCutsARequestInFlight) {
  FakeClock still;
  ctx_.clock = &still;
  auto runner = MockRunner("w: [{hang: true}]");
  AgentResult r;
  std::thread conversation(
      [&] { r = runner->Run(Invocation({MockSource("w")}), ctx_); });
  still.WaitForSleepers(1);
  ctx_.cancel.Cancel(CancelReason::kAbort);
  conversation.join();
  EXPECT_EQ(r.outcome, Outcome::kAborted);
}

TEST_F(ClassificationTest, ACancelThatIsADeadlineIsTheDeadline) {
  FakeClock still;
  ctx_.clock = &still;
  auto runner = MockRunner("w: [{hang: true}]");
  AgentResult r;
  std::thread conversation(
      [&] { r = runner->Run(Invocation({MockSource("w")}), ctx_); });
  still.WaitForSleepers(1);
  ctx_.cancel.Cancel(CancelReason::kDeadline);
  conversation.join();
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
}

}  // namespace
}  // namespace steps::agent
