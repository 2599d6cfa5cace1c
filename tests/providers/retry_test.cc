#include "providers/retry.h"

#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "common/log_capture.h"

namespace steps {
namespace {

using test_support::LogCapture;

// Answers from a queue; records when each request was made.
class QueueProvider : public Provider {
 public:
  explicit QueueProvider(Clock& clock) : clock_(clock) {}
  void Push(ChatResult r) { results_.push_back(std::move(r)); }
  ChatResult Send(const ChatRequest&, const CallContext&) override {
    sent_at_.push_back(clock_.Now());
    if (results_.empty()) {
      ChatAnswer a;
      a.text = "default";
      return a;
    }
    ChatResult r = results_.front();
    results_.pop_front();
    return r;
  }
  const std::vector<SteadyTime>& sent_at() const { return sent_at_; }

 private:
  Clock& clock_;
  std::deque<ChatResult> results_;
  std::vector<SteadyTime> sent_at_;
};

ProviderError Http(int status, std::optional<Millis> retry_after = {}) {
  ProviderError e;
  e.kind = ProviderErrorKind::kHttpStatus;
  e.http_status = status;
  e.retry_after = retry_after;
  e.message = "HTTP " + std::to_string(status) + ": boom";
  return e;
}

ChatAnswer Text(std::string s) {
  ChatAnswer a;
  a.text = std::move(s);
  return a;
}

class RetryTest : public ::testing::Test {
 protected:
  RetryTest() : clock_(/*auto_advance=*/true), inner_(clock_) {
    policy_.attempts = 3;
    policy_.jitter = [] { return 1.0; };  // The full exponential delay.
    context_.clock = &clock_;
    context_.agent = "coder";
    request_.model = "deepseek-v4-pro";
  }
  std::vector<Millis> Gaps() const {
    std::vector<Millis> gaps;
    const auto& at = inner_.sent_at();
    for (size_t i = 1; i < at.size(); ++i) {
      gaps.push_back(std::chrono::duration_cast<Millis>(at[i] - at[i - 1]));
    }
    return gaps;
  }

  FakeClock clock_;
  QueueProvider inner_;
  RetryPolicy policy_;
  CallContext context_;
  ChatRequest request_;
};

TEST(BackoffTest, ExponentialWithJitterIntoTheUpperHalf) {
  RetryPolicy p;
  p.initial_backoff = Millis(1000);
  p.multiplier = 2;
  p.max_backoff = Millis(5000);
  EXPECT_EQ(BackoffDelay(p, 1, 1.0), Millis(1000));
  EXPECT_EQ(BackoffDelay(p, 2, 1.0), Millis(2000));
  EXPECT_EQ(BackoffDelay(p, 3, 1.0), Millis(4000));
  EXPECT_EQ(BackoffDelay(p, 4, 1.0), Millis(5000));  // Capped.
  EXPECT_EQ(BackoffDelay(p, 1, 0.0), Millis(500));
  EXPECT_EQ(BackoffDelay(p, 2, 0.5), Millis(1500));
}

TEST_F(RetryTest, RetryableStatusesAreRetriedUpToAttemptsWithBackoff) {
  for (int status : {408, 409, 429, 500, 502, 503, 529}) {
    SCOPED_TRACE(status);
    FakeClock clock(true);
    QueueProvider inner(clock);
    inner.Push(Http(status));
    inner.Push(Http(status));
    inner.Push(Text("fine"));
    context_.clock = &clock;
    RetryingProvider retrying(inner, policy_);
    ChatResult r = retrying.Send(request_, context_);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.answer().text, "fine");
    EXPECT_EQ(r.answer().requests, 3);
    EXPECT_EQ(clock.total_slept(), Millis(1000 + 2000));
  }
}

TEST_F(RetryTest, FinalStatusesAreNotRetried) {
  for (int status : {400, 401, 403, 404, 422}) {
    SCOPED_TRACE(status);
    FakeClock clock(true);
    QueueProvider inner(clock);
    inner.Push(Http(status));
    context_.clock = &clock;
    RetryingProvider retrying(inner, policy_);
    ChatResult r = retrying.Send(request_, context_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().http_status, status);
    EXPECT_EQ(r.error().requests, 1);
    EXPECT_EQ(inner.sent_at().size(), 1u);
    EXPECT_EQ(clock.total_slept(), Millis(0));
  }
}

TEST_F(RetryTest, LogsEachRetryAndTheGiveUpExactly) {
  LogCapture log;
  inner_.Push(Http(500));
  inner_.Push(Http(500));
  inner_.Push(Http(500));
  RetryingProvider retrying(inner_, policy_);
  ChatResult r = retrying.Send(request_, context_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().requests, 3);
  EXPECT_EQ(r.error().ToStatus().code(), StatusCode::kUnavailable);
  std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "WRN agent.request_retry agent=coder model=deepseek-v4-pro "
            "attempt=1 attempts=3 status=500");
  EXPECT_EQ(lines[1],
            "WRN agent.request_retry agent=coder model=deepseek-v4-pro "
            "attempt=2 attempts=3 status=500");
  EXPECT_EQ(lines[2],
            "WRN agent.conversation_failed agent=coder provider_requests=3 "
            "error=\"gave up after 3 requests: HTTP 500: boom\"");
}

TEST_F(RetryTest, ProviderRequestsCountsTheWholeConversation) {
  LogCapture log;
  context_.prior_requests = 4;
  inner_.Push(Http(401));
  RetryingProvider retrying(inner_, policy_);
  ASSERT_FALSE(retrying.Send(request_, context_).ok());
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_EQ(log.lines()[0],
            "WRN agent.conversation_failed agent=coder provider_requests=5 "
            "error=\"HTTP 401: boom\"");
}

TEST_F(RetryTest, RetryAfterIsHonouredInsteadOfBackoff) {
  inner_.Push(Http(429, Millis(7000)));
  inner_.Push(Http(503, Millis(250)));
  inner_.Push(Text("ok"));
  RetryingProvider retrying(inner_, policy_);
  ASSERT_TRUE(retrying.Send(request_, context_).ok());
  EXPECT_EQ(Gaps(), (std::vector<Millis>{Millis(7000), Millis(250)}));
}

TEST_F(RetryTest, RetryAfterPastTheDeadlineGivesUpAtOnceAndSaysSo) {
  LogCapture log;
  context_.deadline = Deadline::After(clock_, Millis(5000));
  inner_.Push(Http(429, Millis(30000)));
  RetryingProvider retrying(inner_, policy_);
  ChatResult r = retrying.Send(request_, context_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(inner_.sent_at().size(), 1u);
  EXPECT_EQ(clock_.total_slept(), Millis(0));
  EXPECT_EQ(r.error().http_status, 429);
  EXPECT_NE(r.error().message.find("the server asked to wait 30s but the "
                                   "deadline is 5s away"),
            std::string::npos)
      << r.error().message;
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_NE(log.lines()[0].find("agent.conversation_failed"),
            std::string::npos);
}

TEST_F(RetryTest, BackoffNeverWaitsPastTheDeadline) {
  context_.deadline = Deadline::After(clock_, Millis(1500));
  inner_.Push(Http(500));
  inner_.Push(Http(500));  // Next backoff (2s) passes the deadline.
  RetryingProvider retrying(inner_, policy_);
  ChatResult r = retrying.Send(request_, context_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(inner_.sent_at().size(), 2u);
  EXPECT_EQ(clock_.total_slept(), Millis(1000));
  EXPECT_NE(r.error().message.find("the backoff is 2s but the deadline is "
                                   "500ms away"),
            std::string::npos)
      << r.error().message;
}

TEST_F(RetryTest, UnboundedServerWaitIsRefusedWithoutADeadline) {
  policy_.max_server_wait = Millis(60000);
  inner_.Push(Http(429, Millis(3600 * 1000)));
  RetryingProvider retrying(inner_, policy_);
  ChatResult r = retrying.Send(request_, context_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(inner_.sent_at().size(), 1u);
  EXPECT_NE(r.error().message.find("longer than 1m"), std::string::npos);
}

TEST_F(RetryTest, DeadlineAndCancellationAreNeverRetriedOrLoggedAsRetries) {
  LogCapture log;
  ProviderError deadline;
  deadline.kind = ProviderErrorKind::kDeadline;
  deadline.message = "context deadline exceeded";
  inner_.Push(deadline);
  RetryingProvider retrying(inner_, policy_);
  ChatResult r = retrying.Send(request_, context_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().ToStatus().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(inner_.sent_at().size(), 1u);
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_EQ(log.lines()[0],
            "WRN agent.conversation_failed agent=coder provider_requests=1 "
            "error=\"context deadline exceeded\"");
}

TEST_F(RetryTest, CancellationDuringBackoffEndsTheCall) {
  FakeClock clock(/*auto_advance=*/false);
  QueueProvider inner(clock);
  inner.Push(Http(503));
  context_.clock = &clock;
  RetryingProvider retrying(inner, policy_);
  std::thread canceller([&] {
    clock.WaitForSleepers(1);
    context_.cancel.Cancel(CancelReason::kAbort);
  });
  ChatResult r = retrying.Send(request_, context_);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kCancelled);
  EXPECT_EQ(inner.sent_at().size(), 1u);
}

TEST_F(RetryTest, ClassifiesEveryKind) {
  auto retryable = [](ProviderErrorKind k) {
    ProviderError e;
    e.kind = k;
    return e.retryable();
  };
  EXPECT_TRUE(retryable(ProviderErrorKind::kConnection));
  EXPECT_TRUE(retryable(ProviderErrorKind::kTimeout));
  EXPECT_TRUE(retryable(ProviderErrorKind::kMalformed));
  EXPECT_TRUE(retryable(ProviderErrorKind::kStreamIdle));
  EXPECT_TRUE(retryable(ProviderErrorKind::kStreamError));
  EXPECT_FALSE(retryable(ProviderErrorKind::kTooLarge));
  EXPECT_FALSE(retryable(ProviderErrorKind::kDeadline));
  EXPECT_FALSE(retryable(ProviderErrorKind::kCancelled));
  EXPECT_FALSE(retryable(ProviderErrorKind::kConfig));
  for (int s : {408, 409, 429, 500, 503, 529, 599}) {
    EXPECT_TRUE(IsRetryableHttpStatus(s)) << s;
  }
  for (int s : {400, 401, 403, 404, 422, 418}) {
    EXPECT_FALSE(IsRetryableHttpStatus(s)) << s;
  }
}

}  // namespace
}  // namespace steps
