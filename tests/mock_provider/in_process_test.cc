// The mock provider in-process: scripts, expectations and faults through
// the real adapters and retry policy, on a FakeClock.
#include "mock_provider/in_process.h"

#include <gtest/gtest.h>

#include <thread>

#include "providers/retry.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

class InProcessTest : public ::testing::Test {
 protected:
  void Load(const std::string& yaml) {
    auto script = ParseMockScriptText(yaml);
    ASSERT_TRUE(script.ok()) << script.status().message();
    engine_ = std::make_shared<MockEngine>(std::move(*script));
    transport_ = std::make_unique<InProcessMockTransport>(engine_, clock_);
    RegisterBuiltinProviders(registry_);
    RegisterMockProvider(registry_, *transport_);
  }
  ResolvedSource Source(const std::string& model, bool stream = false) {
    SourceSpec spec;
    spec.model = model;
    spec.stream = stream;
    spec.stream_idle_limit = Millis(5000);
    auto source = registry_.Create(spec, MockProviderEnvironment(*transport_));
    EXPECT_TRUE(source.ok()) << source.status().message();
    return std::move(*source);
  }
  ChatResult Send(Provider& p, const std::string& agent,
                  const std::string& model, CallContext context = {}) {
    context.clock = &clock_;
    context.agent = agent;
    ChatRequest r;
    r.model = model;
    r.messages = {Message::System("Be terse. Deadline: 10m."),
                  Message::User("Review the release.")};
    return p.Send(r, context);
  }

  FakeClock clock_{/*auto_advance=*/true};
  std::shared_ptr<MockEngine> engine_;
  std::unique_ptr<InProcessMockTransport> transport_;
  ProviderRegistry registry_;
};

TEST_F(InProcessTest, ScriptsAnswerInOrderByAgentThenModelThenDefault) {
  Load(R"(
reviewer:
  - say: first
  - say: second
special-model:
  - say: by model
default:
  say: fallback
)");
  ResolvedSource s = Source("mock/special-model");
  EXPECT_EQ(Send(*s.provider, "reviewer", s.model).answer().text, "first");
  EXPECT_EQ(Send(*s.provider, "reviewer", s.model).answer().text, "second");
  EXPECT_EQ(Send(*s.provider, "reviewer", s.model).answer().text, "fallback");
  EXPECT_EQ(Send(*s.provider, "other", s.model).answer().text, "by model");
  EXPECT_EQ(Send(*s.provider, "other", s.model).answer().text, "fallback");
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 5u);
  EXPECT_EQ(requests[0].script, "reviewer");
  EXPECT_EQ(requests[0].entry_line, 3);
  EXPECT_EQ(requests[2].script, "");
  EXPECT_EQ(requests[3].script, "special-model");
}

TEST_F(InProcessTest, AnUnscriptedRequestIsAFinal400SayingSo) {
  Load("reviewer:\n  - say: only one\n");
  ResolvedSource s = Source("mock/m");
  ASSERT_TRUE(Send(*s.provider, "reviewer", s.model).ok());
  ChatResult r = Send(*s.provider, "reviewer", s.model);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_FALSE(r.error().retryable());
  EXPECT_EQ(r.error().message,
            "HTTP 400: mock: nothing scripted for agent 'reviewer', model 'm' "
            "(request 2; its script has 1 entry)");
}

TEST_F(InProcessTest, ToolCallsComeBackWithIdsAndArguments) {
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    Load(R"(
coder:
  - say: Reading both.
    call:
      - {name: read_file, arguments: {path: a.txt}}
      - {name: read_file, arguments: {path: b.txt}}
)");
    ResolvedSource s = Source("mock/m", stream);
    ChatResult r = Send(*s.provider, "coder", s.model);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.answer().text, "Reading both.");
    ASSERT_EQ(r.answer().tool_calls.size(), 2u);
    EXPECT_EQ(r.answer().tool_calls[0].id, "call_1_0");
    EXPECT_EQ(r.answer().tool_calls[1].arguments, R"({"path":"b.txt"})");
    EXPECT_EQ(r.answer().finish_reason, "tool_calls");
    EXPECT_GT(r.answer().usage.prompt_tokens, 0);
  }
}

TEST_F(InProcessTest, ExpectationsAreCheckedAndFailuresKept) {
  Load(R"(
reviewer:
  - expect: {system_contains: Deadline, last_contains: release, tool_result: false, request: 1, messages: 2}
    say: fine
  - expect: {system_contains: nowhere, tool_result: true, request: 1}
    say: still answers
)");
  ResolvedSource s = Source("mock/m");
  ASSERT_TRUE(Send(*s.provider, "reviewer", s.model).ok());
  ASSERT_TRUE(Send(*s.provider, "reviewer", s.model).ok());
  std::vector<std::string> failures = engine_->ExpectationFailures();
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_EQ(failures[0],
            "line 5: expect system_contains 'nowhere': the system message is "
            "'Be terse. Deadline: 10m.' (request 2, agent 'reviewer')");
  EXPECT_EQ(failures[1],
            "line 5: expect tool_result true: the request has no tool result "
            "(request 2, agent 'reviewer')");
  EXPECT_EQ(failures[2],
            "line 5: expect request 1: this is request 2 (request 2, agent "
            "'reviewer')");
}

// `body` holds when every key it names is in the wire body with an equal
// value, nested mappings key by key; each miss names the key path.
TEST_F(InProcessTest, ExpectBodyComparesTheWireBodyKeyByKey) {
  Load(R"(
reviewer:
  - expect: {body: {model: m}}
    say: holds
  - expect: {body: {model: other}}
    say: a
  - expect: {body: {seed: 7}}
    say: b
  - expect: {body: {stream_options: {include_usage: true}}}
    say: c
)");
  ResolvedSource s = Source("mock/m");
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(Send(*s.provider, "reviewer", s.model).ok());
  std::vector<std::string> failures = engine_->ExpectationFailures();
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_EQ(failures[0],
            "line 5: expect body model: '\"other\"' expected, the body has "
            "'\"m\"' (request 2, agent 'reviewer')");
  EXPECT_EQ(failures[1],
            "line 7: expect body seed: absent from the body (request 3, agent "
            "'reviewer')");
  EXPECT_EQ(failures[2],
            "line 9: expect body stream_options: absent from the body "
            "(request 4, agent 'reviewer')");
}

TEST_F(InProcessTest, AnEntryWithOnlyModifiersAnswersAsTheDefault) {
  Load(R"(
reviewer:
  - delay: 3s
    expect: {request: 1}
default:
  say: the default
)");
  ResolvedSource s = Source("mock/m");
  ChatResult r = Send(*s.provider, "reviewer", s.model);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.answer().text, "the default");
  EXPECT_EQ(clock_.total_slept(), Millis(3000));
  EXPECT_TRUE(engine_->ExpectationFailures().empty());
}

TEST_F(InProcessTest, ARetryAbsorbsOne500) {
  // The spec's first example: attempts 2 absorbs the one provider 500.
  Load(R"(
reviewer:
  - status: 500
  - say: Release looks good
)");
  ResolvedSource s = Source("mock/m");
  RetryPolicy policy;
  policy.attempts = 2;
  RetryingProvider retrying(*s.provider, policy);
  ChatResult r = Send(retrying, "reviewer", s.model);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "Release looks good");
  EXPECT_EQ(r.answer().requests, 2);
  EXPECT_GE(clock_.total_slept(), Millis(500));
  EXPECT_LE(clock_.total_slept(), Millis(1000));
}

TEST_F(InProcessTest, DelaysAndHangsRunOnTheClockAndStopAtTheDeadline) {
  Load("slow:\n  - delay: 1h\n    say: too late\n");
  ResolvedSource s = Source("mock/m");
  CallContext context;
  context.deadline = Deadline::After(clock_, Millis(20000));
  SteadyTime start = clock_.Now();
  ChatResult r = Send(*s.provider, "slow", s.model, context);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kDeadline);
  EXPECT_EQ(clock_.Now() - start, Millis(20000));
}

TEST_F(InProcessTest, AHangCutByLlmTimeoutIsRetried) {
  Load("stuck:\n  - hang: true\n  - say: unstuck\n");
  ResolvedSource s = Source("mock/m");
  RetryPolicy policy;
  policy.attempts = 3;
  RetryingProvider retrying(*s.provider, policy);
  CallContext context;
  context.llm_timeout = Millis(60000);
  context.deadline = Deadline::After(clock_, Millis(600000));
  ChatResult r = Send(retrying, "stuck", s.model, context);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "unstuck");
}

TEST_F(InProcessTest, FaultsAreClassifiedAsOverTheNetwork) {
  Load(R"(
drop:
  - drop: true
garbage:
  - garbage: true
silent:
  - say: partial answer
    hang: true
event:
  - error_event: overloaded
)");
  ResolvedSource plain = Source("mock/m");
  EXPECT_EQ(Send(*plain.provider, "drop", plain.model).error().kind,
            ProviderErrorKind::kConnection);
  EXPECT_EQ(Send(*plain.provider, "garbage", plain.model).error().kind,
            ProviderErrorKind::kMalformed);
  ResolvedSource streamed = Source("mock/m", /*stream=*/true);
  SteadyTime start = clock_.Now();
  EXPECT_EQ(Send(*streamed.provider, "silent", streamed.model).error().kind,
            ProviderErrorKind::kStreamIdle);
  EXPECT_EQ(clock_.Now() - start, Millis(5000));  // The idle limit.
  EXPECT_EQ(Send(*streamed.provider, "event", streamed.model).error().kind,
            ProviderErrorKind::kStreamError);
}

TEST_F(InProcessTest, CancellationEndsAHang) {
  FakeClock manual;  // Does not move by itself.
  auto script = ParseMockScriptText("stuck:\n  - hang: true\n");
  ASSERT_TRUE(script.ok());
  auto engine = std::make_shared<MockEngine>(std::move(*script));
  InProcessMockTransport transport(engine, manual);
  ProviderRegistry registry;
  RegisterMockProvider(registry, transport);
  SourceSpec spec;
  spec.model = "mock/m";
  auto source = registry.Create(spec, MockProviderEnvironment(transport));
  ASSERT_TRUE(source.ok());
  CallContext context;
  context.clock = &manual;
  context.agent = "stuck";
  std::thread canceller([&] {
    manual.WaitForSleepers(1);
    context.cancel.Cancel(CancelReason::kAbort);
  });
  ChatRequest request;
  request.model = source->model;
  request.messages = {Message::User("hi")};
  ChatResult r = source->provider->Send(request, context);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kCancelled);
}

TEST_F(InProcessTest, TheMockEnvironmentServesEveryProviderWithoutKeys) {
  Load(R"(
reviewer:
  - say: via openrouter
claude:
  - say: via anthropic
)");
  ResolvedSource router = Source("openrouter/qwen/qwen3.7-flash");
  ChatResult r = Send(*router.provider, "reviewer", router.model);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "via openrouter");
  ResolvedSource claude = Source("anthropic/claude-sonnet-4");
  ChatResult c = Send(*claude.provider, "claude", claude.model);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.answer().text, "via anthropic");
  auto requests = engine_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].model, "qwen/qwen3.7-flash");
  EXPECT_EQ(requests[0].format, "openai");
  EXPECT_EQ(requests[1].format, "anthropic");
  EXPECT_EQ(requests[1].model, "claude-sonnet-4");
}

// An adapter in a dialect the mock does not speak: any request it sent on
// the wire would be one the mock cannot read.
class UnspokenAdapter : public Adapter {
 public:
  const AdapterInfo& info() const override {
    static const AdapterInfo info{.name = "unspoken",
                                  .default_base_url = "https://unspoken.test",
                                  .key_env = "UNSPOKEN_KEY",
                                  .key_required = true,
                                  .can_stream = false,
                                  .mock_wire = MockWireFormat::kNone,
                                  .parameters = {}};
    return info;
  }
  Result<HttpRequest> BuildRequest(const ChatRequest&,
                                   const AdapterConfig& config) const override {
    return HttpRequest{config.base_url + "/speak", {}, "<not json/>"};
  }
  ChatResult ParseAnswer(const HttpResponse&,
                         const AdapterConfig&) const override {
    return MalformedAnswer("the mock must not reach this adapter");
  }
};

TEST_F(InProcessTest, AProviderTheMockDoesNotSpeakIsAnsweredAtTheInterface) {
  auto script = ParseMockScriptText(R"(
reviewer:
  - status: 429
    headers: {Retry-After: "3"}
  - say: answered at the interface
    usage: {prompt_tokens: 11, completion_tokens: 4}
  - drop: true
)");
  ASSERT_TRUE(script.ok()) << script.status().message();
  engine_ = std::make_shared<MockEngine>(std::move(*script));
  transport_ = std::make_unique<InProcessMockTransport>(engine_, clock_);
  registry_.RegisterAdapter(std::make_shared<UnspokenAdapter>());
  RegisterMockProvider(registry_, *transport_);
  ResolvedSource s = Source("unspoken/model-x", /*stream=*/true);
  EXPECT_EQ(s.provider_name, "unspoken");

  ChatResult limited = Send(*s.provider, "reviewer", s.model);
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.error().http_status, 429);
  EXPECT_EQ(limited.error().retry_after, Millis(3000));
  ChatResult r = Send(*s.provider, "reviewer", s.model);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "answered at the interface");
  EXPECT_EQ(r.answer().usage.prompt_tokens, 11);
  EXPECT_EQ(r.answer().usage.completion_tokens, 4);
  ChatResult dropped = Send(*s.provider, "reviewer", s.model);
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.error().kind, ProviderErrorKind::kConnection);
  // The adapter cannot stream, so the request did not ask to.
  ASSERT_EQ(engine_->Requests().size(), 3u);
  EXPECT_FALSE(engine_->Requests()[1].stream);
  EXPECT_EQ(engine_->Requests()[1].model, "model-x");
}

// model, tools and last_is: what a recorded script checks. A miss names
// the field, what was expected and what the request holds now, shortened
// around the first difference.
TEST_F(InProcessTest, ExpectModelToolsAndLastIs) {
  Load(R"(
reviewer:
  - expect: {model: m, tools: [], last_is: Review the release.}
    say: holds
  - expect: {model: other, tools: [read_file], last_is: Review the release!}
    say: misses
)");
  ResolvedSource s = Source("mock/m");
  ASSERT_TRUE(Send(*s.provider, "reviewer", s.model).ok());
  CallContext context;
  context.step = "review";
  ASSERT_TRUE(Send(*s.provider, "reviewer", s.model, context).ok());
  std::vector<std::string> failures = engine_->ExpectationFailures();
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_EQ(failures[0],
            "line 5: expect last_is: the last message expected 'Review the "
            "release!', now 'Review the release.' (they differ from byte 19) "
            "(request 2, agent 'reviewer', step 'review')");
  EXPECT_EQ(failures[1],
            "line 5: expect model: expected 'other', now 'm' (request 2, "
            "agent 'reviewer', step 'review')");
  EXPECT_EQ(failures[2],
            "line 5: expect tools: expected [read_file], now [] (request 2, "
            "agent 'reviewer', step 'review')");
}

TEST_F(InProcessTest, ALongDifferenceIsShownAroundWhereItStarts) {
  std::string head(300, 'a');
  Load("reviewer:\n  - expect: {last_is: '" + head + "XYZ" + head +
       "'}\n    say: ok\n");
  ResolvedSource s = Source("mock/m");
  ChatRequest r;
  r.model = s.model;
  r.messages = {Message::User(head + "QRS" + head)};
  CallContext context;
  context.clock = &clock_;
  context.agent = "reviewer";
  ASSERT_TRUE(s.provider->Send(r, context).ok());
  std::vector<std::string> failures = engine_->ExpectationFailures();
  ASSERT_EQ(failures.size(), 1u);
  std::string window = "..." + std::string(40, 'a');
  EXPECT_EQ(failures[0],
            "line 2: expect last_is: the last message expected '" + window +
                "XYZ" + std::string(57, 'a') + "...', now '" + window + "QRS" +
                std::string(57, 'a') +
                "...' (they differ from byte 301) (request 1, agent "
                "'reviewer')");
}

TEST_F(InProcessTest, AFailureShowsLineBreaksAsEscapesOnOneLine) {
  Load("reviewer:\n  - expect: {last_is: \"one\\ntwo\"}\n    say: ok\n");
  ResolvedSource s = Source("mock/m");
  ChatRequest r;
  r.model = s.model;
  r.messages = {Message::User("one\nthree")};
  CallContext context;
  context.clock = &clock_;
  context.agent = "reviewer";
  ASSERT_TRUE(s.provider->Send(r, context).ok());
  std::vector<std::string> failures = engine_->ExpectationFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0],
            "line 2: expect last_is: the last message expected 'one\\ntwo', "
            "now 'one\\nthree' (they differ from byte 6) (request 1, agent "
            "'reviewer')");
}

// With several scripts, a miss also names the request's number in its own
// script: the entry to look at.
TEST_F(InProcessTest, AMissNamesTheRequestInItsOwnScript) {
  Load(R"(
writer:
  - say: first
reviewer:
  - expect: {model: other}
    say: second
)");
  ResolvedSource s = Source("mock/m");
  ASSERT_TRUE(Send(*s.provider, "writer", s.model).ok());
  ASSERT_TRUE(Send(*s.provider, "reviewer", s.model).ok());
  std::vector<std::string> failures = engine_->ExpectationFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0],
            "line 5: expect model: expected 'other', now 'm' (request 2, "
            "agent 'reviewer', its request 1)");
}

}  // namespace
}  // namespace steps
