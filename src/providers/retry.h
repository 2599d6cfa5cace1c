// The request-retry policy, as a Provider around a single-request Provider.
// One failing request is re-sent, never the conversation: the caller gets
// back an answer to exactly the request it made, or the last error.
//
//   RetryingProvider retrying(adapter, RetryPolicy{.attempts = 3});
//   ChatResult r = retrying.Send(request, context);
//
// Retried: ProviderError::retryable() (connection errors, request timeouts,
// HTTP 408, 409, 429, 5xx, malformed answers, idle or failed streams).
// Waits: the server's Retry-After / retry-after-ms when it sent one,
// otherwise exponential backoff with jitter. No wait runs past the step's
// deadline: when the wait would, the call gives up at once and says so.
// Log lines (exact):
//   WRN agent.request_retry agent=A model=M attempt=K attempts=N status=S
//   WRN agent.conversation_failed agent=A provider_requests=N error="..."
#ifndef STEPS_PROVIDERS_RETRY_H_
#define STEPS_PROVIDERS_RETRY_H_

#include <functional>

#include "providers/guard.h"
#include "providers/provider.h"

namespace steps {

struct RetryPolicy {
  // Requests in total for one call, first included. REQUIRES: >= 1.
  // Default 3 (the agent package default).
  int attempts = 3;
  // Backoff before retry k (k = 1, 2, ...) is
  //   d = min(max_backoff, initial_backoff * multiplier^(k-1))
  // jittered uniformly into [d/2, d]. Defaults: 1 s, x2, at most 30 s.
  Millis initial_backoff{1000};
  double multiplier = 2.0;
  Millis max_backoff{30000};
  // Uniform in [0, 1]; 1 gives the full d. Default: a thread-local PRNG.
  // Tests pass a constant.
  std::function<double()> jitter;
  // With no deadline, a server-requested wait longer than this is refused
  // (the call gives up at once). Default 10 min.
  Millis max_server_wait{600000};
  // The retry budget of the host (retry_budget:), shared by every call to
  // it; null: none. Not owned. A retry it refuses ends the call with the
  // error it had (retry_denied set), logged:
  //   WRN agent.retry_denied agent=A model=M attempt=K host=H retries=R calls=C
  RetryBudget* budget = nullptr;
  RetryBudgetSpec budget_spec;
  std::string host;  // For the log line.
};

// The jittered backoff before retry `retry` (1-based) for a jitter value
// `u` in [0, 1].
Millis BackoffDelay(const RetryPolicy& policy, int retry, double u);

class RetryingProvider : public Provider {
 public:
  // `inner` is not owned and must outlive this object; it sends exactly one
  // request per Send. Thread-safe if `inner` is (and policy.jitter is).
  RetryingProvider(Provider& inner, RetryPolicy policy);

  // The answer carries requests = requests sent; an error carries the same
  // in ProviderError::requests. Waits use context.clock and are cut by
  // context.cancel (the call then fails with kCancelled, unlogged).
  // Never throws: an exception from `inner`, or an answer past the limits
  // of providers/wire_json.h, is a kMalformed error (retried) whose message
  // says what was wrong.
  ChatResult Send(const ChatRequest& request,
                  const CallContext& context) override;

 private:
  // Why `error` (after `attempt` of `attempts`) is not retried after
  // `wait`; nullopt when it may be.
  std::optional<std::string> WhyNotRetry(Millis wait, bool server_asked,
                                         const CallContext& context) const;
  // Asks the budget for a retry; logs and explains a refusal.
  bool BudgetAllows(const ChatRequest& request, const CallContext& context,
                    int attempt, ProviderError& error) const;

  Provider& inner_;
  RetryPolicy policy_;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_RETRY_H_
