#include "providers/guard.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <thread>

#include "common/log_capture.h"
#include "providers/retry.h"

namespace steps {
namespace {

using test_support::LogCapture;

bool Has(const LogCapture& log, const std::string& text) {
  return !log.LinesWith(text).empty();
}

std::string All(const LogCapture& log) {
  std::string out;
  for (const std::string& line : log.lines()) out += line + "\n";
  return out;
}

Millis Since(const Clock& clock, SteadyTime t0) {
  return std::chrono::duration_cast<Millis>(clock.Now() - t0);
}

class RateLimiterTest : public ::testing::Test {
 protected:
  RateLimiterTest() : clock_(/*auto_advance=*/true) {
    context_.clock = &clock_;
    t0_ = clock_.Now();
  }
  // Acquires and releases at once; returns the wait.
  Millis Take(RateLimiter& limiter, int64_t tokens = 1,
              std::optional<int64_t> used = std::nullopt) {
    Admission a = limiter.Acquire(tokens, context_);
    EXPECT_FALSE(a.error) << a.error->message;
    limiter.Release(tokens, used, clock_.Now());
    return a.waited;
  }

  FakeClock clock_;
  CallContext context_;
  SteadyTime t0_;
};

TEST_F(RateLimiterTest, RequestsPerMinuteSpreadsRequestsEvenly) {
  RateLimiter limiter({.requests_per_minute = 60});
  EXPECT_EQ(Take(limiter), Millis(0));
  EXPECT_EQ(Take(limiter), Millis(1000));
  EXPECT_EQ(Take(limiter), Millis(1000));
  EXPECT_EQ(Since(clock_, t0_), Millis(2000));
}

TEST_F(RateLimiterTest, AWaitThatWouldEndAtTheDeadlineFailsAtOnce) {
  RateLimiter limiter({.requests_per_minute = 60});
  Take(limiter);
  // The next may start at t0+1s. A deadline exactly there leaves no time
  // for the request: refused without waiting.
  context_.deadline = Deadline::At(t0_ + Millis(1000));
  Admission a = limiter.Acquire(1, context_);
  ASSERT_TRUE(a.error);
  EXPECT_EQ(a.error->kind, ProviderErrorKind::kRateLimited);
  EXPECT_EQ(a.error->requests, 0);
  EXPECT_FALSE(a.error->retryable());
  EXPECT_NE(a.error->message.find("requests_per_minute"), std::string::npos)
      << a.error->message;
  EXPECT_EQ(clock_.total_slept(), Millis(0));
  // One millisecond more, and it waits and goes.
  context_.deadline = Deadline::At(t0_ + Millis(1001));
  a = limiter.Acquire(1, context_);
  EXPECT_FALSE(a.error);
  EXPECT_EQ(a.waited, Millis(1000));
}

TEST_F(RateLimiterTest, TokensPerMinuteChargesTheEstimateThenWhatWasUsed) {
  // 6000 a minute: 100 tokens a second.
  RateLimiter limiter({.tokens_per_minute = 6000});
  // 100 estimated, 300 used: the next waits 3 s, not 1 s.
  EXPECT_EQ(Take(limiter, 100, 300), Millis(0));
  EXPECT_EQ(Take(limiter, 100, 100), Millis(3000));
  // 100 estimated, none used (an error): charged the estimate.
  EXPECT_EQ(Take(limiter, 100), Millis(1000));
}

TEST_F(RateLimiterTest, HeadersLowerTheLimitAndStopAtAnEmptyWindow) {
  RateLimiter limiter({.requests_per_minute = 6000});
  RateLimitHint hint;
  hint.request_limit = 60;  // Lower than declared: followed.
  limiter.Observe(hint, clock_.Now());
  EXPECT_EQ(limiter.Effective().requests_per_minute, 60);
  EXPECT_EQ(Take(limiter), Millis(0));
  EXPECT_EQ(Take(limiter), Millis(1000));
  // None left until the reset, 5 s away.
  hint = {};
  hint.requests_remaining = 0;
  hint.requests_reset = Millis(5000);
  limiter.Observe(hint, clock_.Now());
  EXPECT_EQ(Take(limiter), Millis(5000));
  // A higher limit from the server does not raise the declared one.
  hint = {};
  hint.request_limit = 1000000;
  limiter.Observe(hint, clock_.Now());
  EXPECT_EQ(limiter.Effective().requests_per_minute, 6000);
}

TEST_F(RateLimiterTest, ARetryAfterHoldsEveryRequest) {
  RateLimiter limiter({.max_concurrent = 100});
  limiter.HoldUntil(clock_.Now() + Millis(2500), clock_.Now());
  EXPECT_EQ(Take(limiter), Millis(2500));
  EXPECT_EQ(Take(limiter), Millis(0));
}

TEST_F(RateLimiterTest, HostileFiguresNeitherOverflowNorLiftTheLimit) {
  // A server's reset in year 9999 holds (for a year), and a step with a
  // 30 s deadline is refused at once.
  RateLimiter limiter({.requests_per_minute = 600});
  RateLimitHint hint;
  hint.requests_remaining = 0;
  hint.requests_reset = Millis(int64_t{365} * 24 * 3600 * 1000);
  limiter.Observe(hint, clock_.Now());
  context_.deadline = Deadline::After(clock_, Millis(30000));
  Admission a = limiter.Acquire(1, context_);
  ASSERT_TRUE(a.error);
  EXPECT_EQ(a.error->kind, ProviderErrorKind::kRateLimited);
  // A usage of 2e9 tokens at 10 a minute: still held, not wrapped around.
  RateLimiter tokens({.tokens_per_minute = 10});
  EXPECT_EQ(Take(tokens, 1, int64_t{2000000000}), Millis(0));
  a = tokens.Acquire(1, context_);
  ASSERT_TRUE(a.error);
  EXPECT_EQ(a.error->kind, ProviderErrorKind::kRateLimited);
}

TEST_F(RateLimiterTest, WithoutADeadlineAWaitOverTenMinutesIsRefused) {
  RateLimiter limiter({.max_concurrent = 10});
  limiter.HoldUntil(clock_.Now() + Millis(600001), clock_.Now());
  Admission a = limiter.Acquire(1, context_);
  ASSERT_TRUE(a.error);
  EXPECT_EQ(a.error->kind, ProviderErrorKind::kRateLimited);
  EXPECT_NE(a.error->message.find("longer than 10m"), std::string::npos)
      << a.error->message;
  // Ten minutes exactly: waited.
  RateLimiter ten({.max_concurrent = 10});
  ten.HoldUntil(clock_.Now() + Millis(600000), clock_.Now());
  EXPECT_EQ(Take(ten), Millis(600000));
}

TEST(RateLimiterThreads, MaxConcurrentWaitsForARequestToEnd) {
  FakeClock clock;  // Never advanced: only a release can admit.
  CallContext context;
  context.clock = &clock;
  RateLimiter limiter({.max_concurrent = 2});
  ASSERT_FALSE(limiter.Acquire(1, context).error);
  ASSERT_FALSE(limiter.Acquire(1, context).error);
  std::atomic<bool> admitted{false};
  std::thread third([&] {
    Admission a = limiter.Acquire(1, context);
    EXPECT_FALSE(a.error);
    EXPECT_EQ(a.why, "max_concurrent");
    admitted = true;
  });
  clock.WaitForSleepers(1);
  EXPECT_FALSE(admitted);
  limiter.Release(1, std::nullopt, clock.Now());
  third.join();
  EXPECT_TRUE(admitted);
}

TEST(RateLimiterThreads, CancellingTheCallEndsItsWait) {
  FakeClock clock;
  CallContext context;
  context.clock = &clock;
  RateLimiter limiter({.max_concurrent = 1});
  ASSERT_FALSE(limiter.Acquire(1, context).error);
  CallContext second = context;
  second.cancel = CancelToken();
  std::thread t([&] {
    Admission a = limiter.Acquire(1, second);
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->kind, ProviderErrorKind::kCancelled);
  });
  clock.WaitForSleepers(1);
  second.cancel.Cancel(CancelReason::kAbort);
  t.join();
}

TEST(RateLimiterThreads, AConcurrencyWaitEndsAtTheDeadline) {
  FakeClock clock;
  CallContext context;
  context.clock = &clock;
  RateLimiter limiter({.max_concurrent = 1});
  ASSERT_FALSE(limiter.Acquire(1, context).error);
  CallContext second = context;
  second.deadline = Deadline::After(clock, Millis(3000));
  std::thread t([&] {
    Admission a = limiter.Acquire(1, second);
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->kind, ProviderErrorKind::kDeadline);
    EXPECT_EQ(a.waited, Millis(3000));
    EXPECT_NE(a.error->message.find("max_concurrent 1"), std::string::npos);
  });
  clock.WaitForSleepers(1);
  clock.Advance(Millis(3000));
  t.join();
}

TEST(RateLimitHeaders, OpenAiAndAnthropic) {
  const WallTime now =
      WallTime(std::chrono::seconds(1796581200));  // 2026-12-06T18:20:00Z
  RateLimitHint h =
      ParseRateLimitHeaders({{"x-ratelimit-limit-requests", "500"},
                             {"x-ratelimit-remaining-requests", "499"},
                             {"x-ratelimit-reset-requests", "120ms"},
                             {"x-ratelimit-limit-tokens", "30000"},
                             {"x-ratelimit-remaining-tokens", "29000"},
                             {"x-ratelimit-reset-tokens", "6m0s"}},
                            now);
  EXPECT_EQ(h.request_limit, 500);
  EXPECT_EQ(h.requests_remaining, 499);
  EXPECT_EQ(h.requests_reset, Millis(120));
  EXPECT_EQ(h.token_limit, 30000);
  EXPECT_EQ(h.tokens_remaining, 29000);
  EXPECT_EQ(h.tokens_reset, Millis(360000));

  h = ParseRateLimitHeaders(
      {{"anthropic-ratelimit-requests-limit", "50"},
       {"anthropic-ratelimit-requests-remaining", "0"},
       {"anthropic-ratelimit-requests-reset", "2026-12-06T18:20:07Z"},
       {"anthropic-ratelimit-input-tokens-limit", "40000"},
       {"anthropic-ratelimit-input-tokens-remaining", "1000"},
       {"anthropic-ratelimit-input-tokens-reset", "2026-12-06T19:20:00+01:00"}},
      now);
  EXPECT_EQ(h.request_limit, 50);
  EXPECT_EQ(h.requests_remaining, 0);
  EXPECT_EQ(h.requests_reset, Millis(7000));
  EXPECT_EQ(h.token_limit, 40000);
  EXPECT_EQ(h.tokens_remaining, 1000);
  EXPECT_EQ(h.tokens_reset, Millis(0));  // The same instant, in +01:00.

  // Nonsense is ignored, not trusted.
  h = ParseRateLimitHeaders(
      {{"x-ratelimit-limit-requests", "-5"},
       {"x-ratelimit-remaining-requests", "12abc"},
       {"x-ratelimit-reset-requests", "soon"},
       {"anthropic-ratelimit-requests-reset", "2026-13-06T18:20:07Z"}},
      now);
  EXPECT_TRUE(h.empty());
}

TEST(RateLimitHeaders, ResetsFarAwayAreAYearAtMost) {
  const Millis year{int64_t{365} * 24 * 3600 * 1000};
  const WallTime now = WallTime(std::chrono::seconds(1796581200));
  RateLimitHint h = ParseRateLimitHeaders(
      {{"x-ratelimit-remaining-requests", "0"},
       {"x-ratelimit-reset-requests", "9999-12-31T23:59:59Z"},
       {"x-ratelimit-reset-tokens", "99999h"}},
      now);
  EXPECT_EQ(h.requests_reset, year);
  EXPECT_EQ(h.tokens_reset, year);
}

// Some servers send a reset as a bare number: seconds from now, or a Unix
// time (GitHub's style). Both count; negative and non-numbers do not.
TEST(RateLimitHeaders, BareNumberResetsAreSecondsOrAUnixTime) {
  const WallTime now = WallTime(std::chrono::seconds(1796581200));
  RateLimitHint h =
      ParseRateLimitHeaders({{"x-ratelimit-reset-requests", "1.5"},
                             {"x-ratelimit-reset-tokens", "1796581230"}},
                            now);
  EXPECT_EQ(h.requests_reset, Millis(1500));
  EXPECT_EQ(h.tokens_reset, Millis(30000));
  // A Unix time already past: no wait. A year at most, as any reset.
  h = ParseRateLimitHeaders({{"x-ratelimit-reset-requests", "1796581100"},
                             {"x-ratelimit-reset-tokens", "999999999"}},
                            now);
  EXPECT_EQ(h.requests_reset, Millis(0));
  EXPECT_EQ(h.tokens_reset, Millis(int64_t{365} * 24 * 3600 * 1000));
  h = ParseRateLimitHeaders({{"x-ratelimit-reset-requests", "-3"},
                             {"x-ratelimit-reset-tokens", "nan"}},
                            now);
  EXPECT_FALSE(h.requests_reset);
  EXPECT_FALSE(h.tokens_reset);
}

TEST(RateLimitHeaders, GoDurations) {
  EXPECT_EQ(ParseGoDuration("1s"), Millis(1000));
  EXPECT_EQ(ParseGoDuration("6m0s"), Millis(360000));
  EXPECT_EQ(ParseGoDuration("1h2m3.5s"), Millis(3723500));
  EXPECT_EQ(ParseGoDuration("20ms"), Millis(20));
  EXPECT_EQ(ParseGoDuration("0.5s"), Millis(500));
  EXPECT_EQ(ParseGoDuration(""), std::nullopt);
  EXPECT_EQ(ParseGoDuration("5"), std::nullopt);
  EXPECT_EQ(ParseGoDuration("5x"), std::nullopt);
  EXPECT_EQ(ParseGoDuration("s"), std::nullopt);
  EXPECT_EQ(ParseGoDuration("-1s"), std::nullopt);
  EXPECT_EQ(ParseGoDuration("99999999999999999999h"), std::nullopt);
}

TEST(RetryBudgetTest, ARatioOfTheCallsAndAFloor) {
  RetryBudget budget;
  const RetryBudgetSpec spec{.ratio = 0.2, .min_retries = 3};
  const SteadyTime t0{};
  for (int i = 0; i < 100; ++i) budget.CallStarted(t0);
  int granted = 0;
  for (int i = 0; i < 100; ++i) granted += budget.TryRetry(spec, t0);
  EXPECT_EQ(granted, 20);  // 0.2 x 100 exactly.
  // Calls that end still count while they are in the window: their burst
  // cannot be retried again as they go.
  for (int i = 0; i < 98; ++i) budget.CallEnded(t0);
  EXPECT_FALSE(budget.TryRetry(spec, t0 + Millis(9999)));
  EXPECT_EQ(budget.Load(t0 + Millis(9999)),
            std::make_pair(int64_t{100}, int64_t{20}));
  // Past the window only the 2 calls still running count, and nothing was
  // granted in it: the floor of 3 holds.
  const SteadyTime later = t0 + Millis(10001);
  EXPECT_EQ(budget.Load(later), std::make_pair(int64_t{2}, int64_t{0}));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(budget.TryRetry(spec, later)) << i;
  EXPECT_FALSE(budget.TryRetry(spec, later));

  RetryBudget none;
  none.CallStarted(t0);
  EXPECT_FALSE(none.TryRetry({.ratio = 0, .min_retries = 0}, t0));
  RetryBudget edge;  // 0.2 x 99 = 19.8: 19 allowed.
  for (int i = 0; i < 99; ++i) edge.CallStarted(t0);
  granted = 0;
  for (int i = 0; i < 99; ++i) granted += edge.TryRetry(spec, t0);
  EXPECT_EQ(granted, 19);
}

// Answers every request with `error` (or an answer when unset); counts.
class CountingProvider : public Provider {
 public:
  std::optional<ProviderError> error;
  std::atomic<int> sent{0};
  ChatResult Send(const ChatRequest&, const CallContext&) override {
    ++sent;
    if (error) return *error;
    ChatAnswer a;
    a.text = "ok";
    return a;
  }
};

ProviderError Http(int status) {
  ProviderError e;
  e.kind = ProviderErrorKind::kHttpStatus;
  e.http_status = status;
  e.message = "HTTP " + std::to_string(status) + ": down";
  return e;
}

TEST(RetryBudgetTest, ADeniedRetryEndsTheCallWithItsErrorAndSaysWhy) {
  FakeClock clock(/*auto_advance=*/true);
  CallContext context;
  context.clock = &clock;
  context.agent = "coder";
  LogCapture log;
  CountingProvider inner;
  inner.error = Http(500);
  RetryBudget budget;
  RetryPolicy policy;
  policy.attempts = 3;
  policy.jitter = [] { return 1.0; };
  policy.budget = &budget;
  policy.budget_spec = {.ratio = 0.2, .min_retries = 0};
  policy.host = "api.example.com";
  RetryingProvider retrying(inner, policy);
  ChatRequest request;
  request.model = "m";
  ChatResult r = retrying.Send(request, context);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(inner.sent, 1);
  EXPECT_TRUE(r.error().retry_denied);
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kHttpStatus);
  EXPECT_EQ(r.error().http_status, 500);
  EXPECT_EQ(r.error().requests, 1);
  EXPECT_NE(r.error().message.find("retry budget of api.example.com"),
            std::string::npos)
      << r.error().message;
  EXPECT_TRUE(Has(log,
                  "WRN agent.retry_denied agent=coder model=m attempt=1 "
                  "host=api.example.com retries=0 calls=1"))
      << All(log);

  // With room (the floor), the call retries as its attempts allow.
  policy.budget_spec = {.ratio = 0.2, .min_retries = 5};
  RetryingProvider roomy(inner, policy);
  r = roomy.Send(request, context);
  EXPECT_EQ(inner.sent, 4);
  EXPECT_FALSE(r.error().retry_denied);
  EXPECT_EQ(budget.Load(clock.Now()), std::make_pair(int64_t{2}, int64_t{2}));
}

class CircuitTest : public ::testing::Test {
 protected:
  CircuitTest() : clock_(/*auto_advance=*/true), circuit_("h:1") {
    context_.clock = &clock_;
  }
  FakeClock clock_;
  Circuit circuit_;
  CallContext context_;
  LogCapture log_;
  const CircuitSpec spec_{.failures = 3, .probe_after = Millis(2000)};
};

TEST_F(CircuitTest, OpensAfterNFailuresInARowAndAProbeClosesIt) {
  bool probe = false;
  for (int i = 0; i < 2; ++i) {
    circuit_.Record(spec_, CircuitVerdict::kOutage, false, context_);
  }
  circuit_.Record(spec_, CircuitVerdict::kOk, false, context_);  // Resets.
  for (int i = 0; i < 2; ++i) {
    circuit_.Record(spec_, CircuitVerdict::kOutage, false, context_);
  }
  EXPECT_FALSE(circuit_.open());
  circuit_.Record(spec_, CircuitVerdict::kOutage, false, context_);
  EXPECT_TRUE(circuit_.open());
  EXPECT_TRUE(
      Has(log_, "WRN provider.circuit_open host=h:1 failures=3 probe_after=2s"))
      << All(log_);
  // The next request waits for the probe time and is the probe.
  Admission a = circuit_.Admit(context_, &probe);
  EXPECT_FALSE(a.error);
  EXPECT_TRUE(probe);
  EXPECT_EQ(a.waited, Millis(2000));
  // It fails: the next probe is 2 s later.
  circuit_.Record(spec_, CircuitVerdict::kOutage, true, context_);
  a = circuit_.Admit(context_, &probe);
  EXPECT_TRUE(probe);
  EXPECT_EQ(a.waited, Millis(2000));
  circuit_.Record(spec_, CircuitVerdict::kOk, true, context_);
  EXPECT_FALSE(circuit_.open());
  EXPECT_TRUE(Has(log_, "INF provider.circuit_closed host=h:1"));
  a = circuit_.Admit(context_, &probe);
  EXPECT_FALSE(probe);
  EXPECT_EQ(a.waited, Millis(0));
}

TEST_F(CircuitTest, NoProbeBeforeTheDeadlineFailsAtOnceForAFallback) {
  for (int i = 0; i < 3; ++i) {
    circuit_.Record(spec_, CircuitVerdict::kOutage, false, context_);
  }
  // The probe is due in 2 s; the deadline is 1.5 s away.
  context_.deadline = Deadline::After(clock_, Millis(1500));
  bool probe = false;
  Admission a = circuit_.Admit(context_, &probe);
  ASSERT_TRUE(a.error);
  EXPECT_EQ(a.error->kind, ProviderErrorKind::kCircuitOpen);
  EXPECT_FALSE(a.error->retryable());
  EXPECT_EQ(a.error->requests, 0);
  EXPECT_FALSE(probe);
  EXPECT_EQ(clock_.total_slept(), Millis(0));
  EXPECT_NE(a.error->message.find("circuit to h:1 is open after 3 failed"),
            std::string::npos)
      << a.error->message;
  // Exactly at the probe time: still no room for it.
  context_.deadline = Deadline::After(clock_, Millis(2000));
  EXPECT_EQ(circuit_.Admit(context_, &probe).error->kind,
            ProviderErrorKind::kCircuitOpen);
}

TEST(CircuitThreads, AWaitForAnotherProbeEndsAtTheDeadlineAndCountsTheWait) {
  FakeClock clock;
  CallContext context;
  context.clock = &clock;
  Circuit circuit("h");
  const CircuitSpec spec{.failures = 1, .probe_after = Millis(0)};
  circuit.Record(spec, CircuitVerdict::kOutage, false, context);
  bool probe = false;
  ASSERT_FALSE(circuit.Admit(context, &probe).error);
  ASSERT_TRUE(probe);  // Out, never answered.
  CallContext other = context;
  other.deadline = Deadline::After(clock, Millis(4000));
  std::thread t([&] {
    bool p = false;
    Admission a = circuit.Admit(other, &p);
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->kind, ProviderErrorKind::kDeadline);
    EXPECT_EQ(a.waited, Millis(4000));
    EXPECT_NE(a.error->message.find("circuit to h is open"), std::string::npos);
  });
  clock.WaitForSleepers(1);
  clock.Advance(Millis(4000));
  t.join();
}

TEST(CircuitThreads, OneProbeAtATimeOthersWaitForIt) {
  FakeClock clock;
  CallContext context;
  context.clock = &clock;
  Circuit circuit("h");
  const CircuitSpec spec{.failures = 1, .probe_after = Millis(0)};
  circuit.Record(spec, CircuitVerdict::kOutage, false, context);
  bool probe = false;
  ASSERT_FALSE(circuit.Admit(context, &probe).error);
  ASSERT_TRUE(probe);
  std::atomic<bool> admitted{false};
  std::thread other([&] {
    bool p = true;
    Admission a = circuit.Admit(context, &p);
    EXPECT_FALSE(a.error);
    EXPECT_FALSE(p);  // The circuit closed: a plain request.
    admitted = true;
  });
  clock.WaitForSleepers(1);
  EXPECT_FALSE(admitted);
  circuit.Record(spec, CircuitVerdict::kOk, true, context);
  other.join();
  EXPECT_TRUE(admitted);
}

TEST(CircuitVerdicts, WhatCountsAsAnOutage) {
  auto kind = [](ProviderErrorKind k) {
    ProviderError e;
    e.kind = k;
    return ClassifyForCircuit(e);
  };
  EXPECT_EQ(ClassifyForCircuit(Http(500)), CircuitVerdict::kOutage);
  EXPECT_EQ(ClassifyForCircuit(Http(529)), CircuitVerdict::kOutage);
  EXPECT_EQ(ClassifyForCircuit(Http(429)), CircuitVerdict::kOk);
  EXPECT_EQ(ClassifyForCircuit(Http(400)), CircuitVerdict::kOk);
  EXPECT_EQ(kind(ProviderErrorKind::kConnection), CircuitVerdict::kOutage);
  EXPECT_EQ(kind(ProviderErrorKind::kTimeout), CircuitVerdict::kOutage);
  EXPECT_EQ(kind(ProviderErrorKind::kCancelled), CircuitVerdict::kNeutral);
  EXPECT_EQ(kind(ProviderErrorKind::kDeadline), CircuitVerdict::kNeutral);
  EXPECT_EQ(kind(ProviderErrorKind::kRateLimited), CircuitVerdict::kNeutral);
}

TEST(GuardedProviderTest, WaitsAreStampedLoggedAndA429HoldsTheSource) {
  FakeClock clock(/*auto_advance=*/true);
  CallContext context;
  context.clock = &clock;
  context.agent = "a";
  LogCapture log;
  RateLimiter limiter({.requests_per_minute = 120});
  CountingProvider inner;
  GuardedProvider guarded(inner, {.limiter = &limiter,
                                  .circuit = nullptr,
                                  .circuit_spec = {},
                                  .host = "h"});
  ChatRequest request;
  ChatResult r = guarded.Send(request, context);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.answer().waited, Millis(0));
  r = guarded.Send(request, context);
  EXPECT_EQ(r.answer().waited, Millis(500));
  EXPECT_TRUE(Has(log,
                  "INF provider.rate_wait agent=a host=h waited=500ms "
                  "limit=requests_per_minute"))
      << All(log);
  ProviderError too_many = Http(429);
  too_many.retry_after = Millis(4000);
  inner.error = too_many;
  r = guarded.Send(request, context);
  EXPECT_FALSE(r.ok());
  inner.error.reset();
  const SteadyTime before = clock.Now();
  r = guarded.Send(request, context);
  EXPECT_EQ(Since(clock, before), Millis(4000));
  EXPECT_EQ(r.answer().waited, Millis(4000));
}

TEST(HostOfTest, NamesTheHost) {
  EXPECT_EQ(HostOf("https://api.openai.com/v1"), "api.openai.com");
  EXPECT_EQ(HostOf("http://127.0.0.1:8080/"), "127.0.0.1:8080");
  EXPECT_EQ(HostOf("http://u:p@h:1/x"), "h:1");
  EXPECT_EQ(HostOf("mock"), "mock");
}

TEST(EstimateTokensTest, AboutFourBytesATokenPlusTheAnswersCap) {
  ChatRequest r;
  r.messages.push_back(Message::User(std::string(400, 'x')));
  EXPECT_EQ(EstimateTokens(r), 100);
  r.max_tokens = 50;
  EXPECT_EQ(EstimateTokens(r), 150);
  r.params.max_output_tokens = 10;
  EXPECT_EQ(EstimateTokens(r), 110);
}

}  // namespace
}  // namespace steps
