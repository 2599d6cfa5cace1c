// What a pipeline declares to protect a provider: a source's rate limits,
// and an agent's retry budget and circuit breaker (docs/agents.md,
// "Protecting a provider"). Plain values; providers/guard.h enforces them.
#ifndef STEPS_PROVIDERS_LIMITS_H_
#define STEPS_PROVIDERS_LIMITS_H_

#include <cstdint>

#include "core/duration.h"

namespace steps {

// A source's `rate_limit:`. 0: no limit of that kind. Declaring one (even
// empty) also makes the source follow the limits its server announces in
// x-ratelimit-* / anthropic-ratelimit-* headers.
struct RateLimitSpec {
  int64_t max_concurrent = 0;       // Requests in flight at once.
  int64_t requests_per_minute = 0;  // Spread evenly: one per 60/N s.
  int64_t tokens_per_minute = 0;    // Estimated before, settled after.

  // Each limit the tighter of the two (0 is no limit).
  RateLimitSpec Tighter(const RateLimitSpec& other) const;
};

// `retry_budget:`: retries to a host may be at most `ratio` of its recent
// calls, and always at least `min_retries` (providers/guard.h).
struct RetryBudgetSpec {
  double ratio = 0.2;
  int64_t min_retries = 3;
};

// `circuit:`: after `failures` consecutive failed requests to a host, new
// requests wait for a probe to succeed; a probe goes out `probe_after`
// after the circuit opened or the last probe failed.
struct CircuitSpec {
  int64_t failures = 5;
  Millis probe_after{5000};
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_LIMITS_H_
