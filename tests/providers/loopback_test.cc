// The real libcurl transport, adapters and retry policy against the mock
// provider's HTTP server on 127.0.0.1, one test per fault.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "common/log_capture.h"
#include "mock_provider/server.h"
#include "providers/anthropic.h"
#include "providers/curl_transport.h"
#include "providers/openai.h"
#include "providers/retry.h"

namespace steps {
namespace {

using test_support::LogCapture;

using std::chrono::steady_clock;

Millis Since(steady_clock::time_point t) {
  return std::chrono::duration_cast<Millis>(steady_clock::now() - t);
}

class LoopbackTest : public ::testing::Test {
 protected:
  void Serve(const std::string& yaml) {
    auto script = ParseMockScriptText(yaml);
    ASSERT_TRUE(script.ok()) << script.status().message();
    engine_ = std::make_shared<MockEngine>(std::move(*script));
    server_ = std::make_unique<MockHttpServer>(engine_);
    ASSERT_TRUE(server_->Start().ok());
  }
  OpenAiProvider Adapter(bool stream = false) {
    OpenAiConfig config;
    config.base_url = server_->base_url();
    config.api_key = "sk-test-secret";
    config.stream = stream;
    config.stream_idle_limit = Millis(200);
    return OpenAiProvider(config, transport_);
  }
  CallContext Context(const std::string& agent) {
    CallContext c;
    c.clock = &clock_;
    c.agent = agent;
    c.step = "step-1";
    return c;
  }
  RetryPolicy Policy(int attempts) {
    RetryPolicy p;
    p.attempts = attempts;
    p.jitter = [] { return 1.0; };
    return p;
  }
  int RequestsFor(const std::string& agent) {
    int n = 0;
    for (const auto& r : engine_->Requests()) n += r.agent == agent;
    return n;
  }
  ChatRequest Hello() {
    ChatRequest r;
    r.model = "mock-model";
    r.messages = {Message::System("sys"), Message::User("hello")};
    return r;
  }

  // Waits use this clock; transfers run in real time.
  FakeClock clock_{/*auto_advance=*/true};
  CurlTransport transport_;
  std::shared_ptr<MockEngine> engine_;
  std::unique_ptr<MockHttpServer> server_;
};

TEST_F(LoopbackTest, EachRetryableStatusIsRetriedWithBackoffWaits) {
  const std::vector<int> statuses = {408, 409, 429, 500, 502, 503, 529};
  std::string yaml;
  for (int s : statuses) {
    yaml += "s" + std::to_string(s) + ":\n  - status: " + std::to_string(s) +
            "\n  - status: " + std::to_string(s) + "\n  - say: recovered\n";
  }
  Serve(yaml);
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(3));
  Millis slept{0};
  for (int s : statuses) {
    SCOPED_TRACE(s);
    std::string agent = "s" + std::to_string(s);
    ChatResult r = retrying.Send(Hello(), Context(agent));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.answer().text, "recovered");
    EXPECT_EQ(r.answer().requests, 3);
    EXPECT_EQ(RequestsFor(agent), 3);
    // Backoff 1s then 2s (jitter pinned to the full delay).
    EXPECT_EQ(clock_.total_slept() - slept, Millis(3000));
    slept = clock_.total_slept();
  }
}

TEST_F(LoopbackTest, AttemptsBoundTheRequestsOfAFailingCall) {
  Serve("down:\n  - status: 500\n  - status: 500\n  - status: 500\n");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(2));
  LogCapture log;
  ChatResult r = retrying.Send(Hello(), Context("down"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 500);
  EXPECT_EQ(r.error().requests, 2);
  EXPECT_EQ(RequestsFor("down"), 2);
  ASSERT_EQ(log.lines().size(), 2u);
  EXPECT_EQ(log.lines()[0],
            "WRN agent.request_retry agent=down model=mock-model attempt=1 "
            "attempts=2 status=500");
  EXPECT_EQ(log.lines()[1],
            "WRN agent.conversation_failed agent=down provider_requests=2 "
            "error=\"gave up after 2 requests: HTTP 500: mock: scripted status "
            "500\"");
}

TEST_F(LoopbackTest, EachFinalStatusIsNotRetried) {
  const std::vector<int> statuses = {400, 401, 403, 404, 422};
  std::string yaml;
  for (int s : statuses) {
    yaml += "s" + std::to_string(s) + ":\n  - status: " + std::to_string(s) +
            "\n  - say: never\n";
  }
  Serve(yaml);
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(5));
  for (int s : statuses) {
    SCOPED_TRACE(s);
    std::string agent = "s" + std::to_string(s);
    ChatResult r = retrying.Send(Hello(), Context(agent));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kHttpStatus);
    EXPECT_EQ(r.error().http_status, s);
    EXPECT_EQ(RequestsFor(agent), 1);
  }
  EXPECT_EQ(clock_.total_slept(), Millis(0));
}

TEST_F(LoopbackTest, RetryAfterSecondsAndMillisecondsAreHonoured) {
  Serve(R"(
limited:
  - status: 429
    headers: {Retry-After: "4"}
  - status: 503
    headers: {retry-after-ms: "1500"}
  - say: through
)");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(3));
  ChatResult r = retrying.Send(Hello(), Context("limited"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "through");
  EXPECT_EQ(clock_.total_slept(), Millis(4000 + 1500));
}

TEST_F(LoopbackTest, RetryAfterPastTheDeadlineIsRefusedAtOnce) {
  Serve(R"(
limited:
  - status: 429
    headers: {Retry-After: "120"}
  - say: too late
)");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(3));
  CallContext context = Context("limited");
  context.deadline = Deadline::After(clock_, Millis(60000));
  ChatResult r = retrying.Send(Hello(), context);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 429);
  EXPECT_EQ(RequestsFor("limited"), 1);
  EXPECT_EQ(clock_.total_slept(), Millis(0));
  EXPECT_NE(r.error().message.find("server asked to wait 2m but the deadline "
                                   "is 1m away"),
            std::string::npos)
      << r.error().message;
}

TEST_F(LoopbackTest, AHangIsCutAtTheDeadlineAndNotRetried) {
  Serve("stuck:\n  - hang: true\n  - say: never\n");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(3));
  CallContext context = Context("stuck");
  context.clock = &RealClock();
  context.deadline = Deadline::After(RealClock(), Millis(300));
  auto start = steady_clock::now();
  ChatResult r = retrying.Send(Hello(), context);
  Millis took = Since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kDeadline);
  EXPECT_EQ(r.error().message, "context deadline exceeded");
  EXPECT_EQ(RequestsFor("stuck"), 1);
  // Tolerance: the cut is libcurl's own timer; allow for a loaded machine.
  EXPECT_GE(took, Millis(290));
  EXPECT_LT(took, Millis(2000));
}

TEST_F(LoopbackTest, LlmTimeoutCutsOneRequestWhichIsThenRetried) {
  Serve("slow:\n  - hang: true\n  - say: second time lucky\n");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(2));
  CallContext context = Context("slow");
  context.llm_timeout = Millis(200);
  context.deadline = Deadline::After(clock_, Millis(600000));
  ChatResult r = retrying.Send(Hello(), context);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "second time lucky");
  EXPECT_EQ(r.answer().requests, 2);
}

TEST_F(LoopbackTest, ASilentStreamIsCutAtTheIdleLimitAndRetried) {
  Serve(R"(
silent:
  - say: "this starts and then stops"
    hang: true
  - say: complete answer
)");
  OpenAiProvider adapter = Adapter(/*stream=*/true);
  CallContext context = Context("silent");
  auto start = steady_clock::now();
  ChatResult first = adapter.Send(Hello(), context);
  Millis took = Since(start);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().kind, ProviderErrorKind::kStreamIdle);
  EXPECT_TRUE(first.error().retryable());
  EXPECT_GE(took, Millis(200));
  EXPECT_LT(took, Millis(2000));
  ChatResult second = adapter.Send(Hello(), context);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second.answer().text, "complete answer");
}

TEST_F(LoopbackTest, DropGarbageAndErrorEventsAreClassifiedRetryable) {
  Serve(R"(
drop:
  - drop: true
garbage:
  - garbage: true
event:
  - error_event: upstream overloaded
)");
  OpenAiProvider plain = Adapter();
  ChatResult dropped = plain.Send(Hello(), Context("drop"));
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.error().kind, ProviderErrorKind::kConnection);
  EXPECT_TRUE(dropped.error().retryable());

  ChatResult garbage = plain.Send(Hello(), Context("garbage"));
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().kind, ProviderErrorKind::kMalformed);
  EXPECT_TRUE(garbage.error().retryable());

  OpenAiProvider streamed = Adapter(/*stream=*/true);
  ChatResult event = streamed.Send(Hello(), Context("event"));
  ASSERT_FALSE(event.ok());
  EXPECT_EQ(event.error().kind, ProviderErrorKind::kStreamError);
  EXPECT_TRUE(event.error().retryable());
  EXPECT_NE(event.error().message.find("upstream overloaded"),
            std::string::npos);
}

TEST_F(LoopbackTest, ADropIsAbsorbedByARetry) {
  Serve("flaky:\n  - drop: true\n  - say: after the drop\n");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(2));
  ChatResult r = retrying.Send(Hello(), Context("flaky"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "after the drop");
}

TEST_F(LoopbackTest, OneConnectionServesManyRequestsAndConversations) {
  Serve("default:\n  say: again\n");
  OpenAiProvider first = Adapter();
  OpenAiProvider second = Adapter();  // Another conversation, same transport.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(first.Send(Hello(), Context("a")).ok());
    ASSERT_TRUE(second.Send(Hello(), Context("b")).ok());
  }
  std::set<int> connections;
  for (const auto& r : engine_->Requests()) connections.insert(r.connection);
  EXPECT_EQ(engine_->Requests().size(), 10u);
  EXPECT_EQ(connections.size(), 1u);
  EXPECT_EQ(transport_.connections_opened(), 1);
}

TEST_F(LoopbackTest, CancellationCutsATransferWithin50ms) {
  Serve("stuck:\n  - hang: true\n");
  OpenAiProvider adapter = Adapter();
  CallContext context = Context("stuck");
  context.clock = &RealClock();
  steady_clock::time_point cancelled_at;
  std::thread canceller([&] {
    // Cancel once the server holds the request.
    while (engine_->Requests().empty()) std::this_thread::yield();
    cancelled_at = steady_clock::now();
    context.cancel.Cancel(CancelReason::kAbort);
  });
  ChatResult r = adapter.Send(Hello(), context);
  Millis took = Since(cancelled_at);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kCancelled);
  // 50 ms is the contract; the bound leaves room for sanitizers.
  EXPECT_LT(took, Millis(150)) << took.count() << " ms";
}

TEST_F(LoopbackTest, ResponsesAreBounded) {
  Serve("big:\n  - say: " + std::string(4096, 'x') + "\n");
  OpenAiConfig config;
  config.base_url = server_->base_url();
  config.max_response_bytes = 1024;
  OpenAiProvider adapter(config, transport_);
  ChatResult r = adapter.Send(Hello(), Context("big"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kTooLarge);
  EXPECT_FALSE(r.error().retryable());
}

TEST_F(LoopbackTest, TheKeyNeverAppearsInErrorsOrLogs) {
  Serve(R"(
leaky:
  - status: 401
    body: '{"error": {"message": "invalid key sk-test-secret"}}'
)");
  OpenAiProvider adapter = Adapter();
  RetryingProvider retrying(adapter, Policy(3));
  LogCapture log;
  ChatResult r = retrying.Send(Hello(), Context("leaky"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "HTTP 401: invalid key [redacted]");
  for (const std::string& line : log.lines()) {
    EXPECT_EQ(line.find("sk-test-secret"), std::string::npos) << line;
  }
}

TEST_F(LoopbackTest, AgentAndStepHeadersAreSent) {
  Serve("default:\n  say: hi\n");
  OpenAiProvider adapter = Adapter();
  ASSERT_TRUE(adapter.Send(Hello(), Context("reviewer")).ok());
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].agent, "reviewer");
  EXPECT_EQ(requests[0].step, "step-1");
  EXPECT_EQ(requests[0].model, "mock-model");
}

TEST_F(LoopbackTest, ARefusedConnectionIsRetryable) {
  Serve("default:\n  say: hi\n");
  std::string url = server_->base_url();
  server_->Stop();
  OpenAiConfig config;
  config.base_url = url;
  OpenAiProvider adapter(config, transport_);
  ChatResult r = adapter.Send(Hello(), Context("a"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kConnection);
  EXPECT_TRUE(r.error().retryable());
}

TEST_F(LoopbackTest, AnthropicAdapterPlainAndStreamed) {
  Serve(R"(
claude:
  - say: Let me look.
    call: {name: read_file, arguments: {path: a.txt}}
  - say: All good.
)");
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    AnthropicConfig config;
    config.base_url = server_->base_url();
    config.api_key = "sk-ant";
    config.stream = stream;
    AnthropicProvider adapter(config, transport_);
    ChatResult r = adapter.Send(Hello(), Context("claude"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    if (!stream) {
      EXPECT_EQ(r.answer().text, "Let me look.");
      ASSERT_EQ(r.answer().tool_calls.size(), 1u);
      EXPECT_EQ(r.answer().tool_calls[0].name, "read_file");
      EXPECT_EQ(r.answer().tool_calls[0].arguments, R"({"path":"a.txt"})");
      EXPECT_EQ(r.answer().finish_reason, "tool_calls");
    } else {
      EXPECT_EQ(r.answer().text, "All good.");
      EXPECT_EQ(r.answer().finish_reason, "stop");
    }
    EXPECT_GT(r.answer().usage.prompt_tokens, 0);
  }
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].format, "anthropic");
  EXPECT_TRUE(requests[1].stream);
}

}  // namespace
}  // namespace steps
