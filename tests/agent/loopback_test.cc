// End to end on real time: the engine with real providers (libcurl)
// against the mock provider's HTTP server on loopback. Each timing check
// states its tolerance; they are generous, for loaded machines and
// sanitizer builds.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "agent/conversation.h"
#include "agent_test_util.h"
#include "mock_provider/server.h"

namespace steps::agent {
namespace {

using std::chrono::milliseconds;
using testing::CountContaining;
using testing::FixedBackoff;
using testing::Invocation;
using testing::RequestMessages;
using testing::TempDir;

constexpr char kNudgeMark[] = "Time is almost up";

class AgentLoopbackTest : public ::testing::Test {
 protected:
  void Serve(const std::string& script_yaml,
             RetryPolicy retry = FixedBackoff(milliseconds(10))) {
    auto script = ParseMockScriptText(script_yaml);
    ASSERT_TRUE(script.ok()) << script.status().message();
    engine_ = std::make_shared<MockEngine>(*script);
    server_ = std::make_unique<MockHttpServer>(engine_);
    ASSERT_TRUE(server_->Start().ok());
    AgentRunnerOptions options;
    options.retry = std::move(retry);
    runner_ = MakeAgentRunner(std::move(options));
  }

  // An OpenAI-compatible source on the mock server; the model is the
  // script key.
  AgentSource Source(const std::string& model) {
    AgentSource s;
    s.model = "openai/" + model;
    s.base_url = server_->base_url();
    return s;
  }

  AgentInvocation Inv(std::vector<AgentSource> sources) {
    AgentInvocation inv = Invocation(std::move(sources));
    inv.working_dir = dir_.path();
    inv.tools = {"read_file", "list_files"};
    return inv;
  }

  Millis Run(const AgentInvocation& inv, AgentResult* r) {
    auto start = std::chrono::steady_clock::now();
    *r = runner_->Run(inv, ctx_);
    return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() -
                                              start);
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  TempDir dir_;
  AgentContext ctx_;  // The real clock.
  std::shared_ptr<MockEngine> engine_;
  std::unique_ptr<MockHttpServer> server_;
  std::unique_ptr<ConversationRunner> runner_;
};

TEST_F(AgentLoopbackTest, ToolConversationWithDisclosure) {
  dir_.Write("notes.txt", "the notes");
  Serve(R"(
m:
  - call: {name: read_file, arguments: {path: notes.txt}}
  - say: No safety issues found
)");
  AgentInvocation inv = Inv({Source("m")});
  inv.timeout = std::chrono::minutes(10);
  AgentResult r;
  Run(inv, &r);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "No safety issues found");
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].agent, "tester");
  auto system = RequestMessages(requests[0])[0];
  EXPECT_EQ(system["role"], "system");
  EXPECT_EQ(system["content"].get<std::string>().rfind(
                "Deadline: you have 10m for this whole task", 0),
            0u);
  EXPECT_NE(
      testing::ContentOf(RequestMessages(requests[1])[3]).find("the notes"),
      std::string::npos);
}

// Timeout 3s. Requests 1 and 2 go at once (no nudge: that needs 2.4s
// gone); the answer to request 2 takes 2.4s, so request 3 leaves with less
// than a fifth (0.6s) left: nudged. Tolerance: the requests' round trips
// and the engine's own time together must stay under 0.6s, or request 3
// would meet the deadline.
TEST_F(AgentLoopbackTest, NudgeOnRealTime) {
  Serve(R"(
m:
  - call: {name: list_files, arguments: {path: "."}}
  - {delay: 2400ms, call: {name: read_file, arguments: {path: x}}}
  - say: wrapped up
)");
  AgentInvocation inv = Inv({Source("m")});
  inv.timeout = milliseconds(3000);
  AgentResult r;
  Run(inv, &r);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_TRUE(r.nudge_sent);
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(CountContaining(requests[0], kNudgeMark), 0);
  EXPECT_EQ(CountContaining(requests[1], kNudgeMark), 0);
  EXPECT_EQ(CountContaining(requests[2], kNudgeMark), 1);
}

// Timeout 800ms, no llm_timeout: the hang is cut at the deadline.
// Tolerance: it ends within [780ms, 800ms + 1.5s] (libcurl's timer may fire
// a few milliseconds early).
TEST_F(AgentLoopbackTest, ExpiryEndsTheStepAtTheDeadline) {
  Serve("m: [{hang: true}, {say: never}]");
  AgentInvocation inv = Inv({Source("m")});
  inv.timeout = milliseconds(800);
  inv.attempts = 3;
  AgentResult r;
  Millis took = Run(inv, &r);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
  EXPECT_GE(took, milliseconds(780));
  EXPECT_LT(took, milliseconds(2300));
  EXPECT_EQ(engine_->Requests().size(), 1u);
}

// Timeout 1.5s, llm_timeout 1s, attempts 1: the primary's hang is cut at
// 1s and the fallback gets the remaining 500ms, not a fresh 1.5s (nor its
// own 1s llm_timeout). Tolerance: the step ends within [1.48s, 3s].
TEST_F(AgentLoopbackTest, DeadlineSharedByAHangingPrimaryAndItsFallback) {
  Serve(R"(
primary: [{hang: true}]
fallback: [{hang: true}]
)");
  AgentInvocation inv = Inv({Source("primary"), Source("fallback")});
  inv.timeout = milliseconds(1500);
  inv.llm_timeout = milliseconds(1000);
  inv.attempts = 1;
  AgentResult r;
  Millis took = Run(inv, &r);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
  EXPECT_GE(took, milliseconds(1480));
  EXPECT_LT(took, milliseconds(3000));
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].model, "fallback");
  // The conversation carried on (500ms of 1.5s left: no nudge yet).
  EXPECT_EQ(RequestMessages(requests[1]), RequestMessages(requests[0]));
}

// Backoff 500ms then 1s; timeout 1.2s. The second wait would end past the
// deadline, so the source gives up after the first: no wait runs past it.
// Tolerance: it ends within [500ms, 1.4s); waiting out the 1s backoff would
// take at least 1.5s.
TEST_F(AgentLoopbackTest, BackoffClippedByTheDeadline) {
  Serve("m: [{status: 500}, {status: 500}, {say: never}]",
        FixedBackoff(milliseconds(500)));
  AgentInvocation inv = Inv({Source("m")});
  inv.timeout = milliseconds(1200);
  inv.attempts = 3;
  AgentResult r;
  Millis took = Run(inv, &r);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_NE(r.error.find("not retried: the backoff is 1s"), std::string::npos)
      << r.error;
  EXPECT_GE(took, milliseconds(500));
  EXPECT_LT(took, milliseconds(1400));
  EXPECT_EQ(engine_->Requests().size(), 2u);
}

TEST_F(AgentLoopbackTest, A500AbsorbedByARetryCarriesTheConversationOn) {
  Serve(R"(
m:
  - call: {name: list_files, arguments: {path: "."}}
  - status: 500
  - say: Release looks good
)");
  AgentInvocation inv = Inv({Source("m")});
  inv.attempts = 2;
  AgentResult r;
  Run(inv, &r);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "Release looks good");
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].body, requests[1].body);
  EXPECT_EQ(RequestMessages(requests[2]).size(), 3u);
}

TEST_F(AgentLoopbackTest, AnOutageIsErrored) {
  Serve("m: [{status: 500}, {status: 500}]");
  AgentInvocation inv = Inv({Source("m")});
  inv.attempts = 2;
  AgentResult r;
  Run(inv, &r);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_EQ(r.provider_requests, 2);
}

}  // namespace
}  // namespace steps::agent
