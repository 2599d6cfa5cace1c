// Protecting a provider from the load a run puts on it (docs/agents.md,
// "Protecting a provider"): client-side rate limits per source, a retry
// budget and a circuit breaker per host. One HostGuards per run holds the
// shared state, so a 1000-cell across is limited as one client.
//
//   HostGuards guards;                       // one per run
//   RateLimiter* limiter = guards.Limiter(source_key, spec);
//   HostHealth* health = guards.Health(base_url);
//   GuardedProvider guarded(adapter, {limiter, &health->circuit, circuit});
//   RetryPolicy policy{...};
//   policy.budget = &health->budget;         // retry_budget: declared
//   RetryingProvider retrying(guarded, policy);
//
// Every wait runs on the call's clock, is cut by its cancel token and never
// passes its deadline: a rate-limit wait that cannot end before the deadline
// fails at once (kRateLimited), as a 429 whose Retry-After is past the
// deadline does. Log lines (exact):
//   INF provider.rate_wait agent=A host=H waited=D limit=WHY
//   WRN provider.circuit_open host=H failures=N probe_after=D
//   INF provider.circuit_closed host=H
#ifndef STEPS_PROVIDERS_GUARD_H_
#define STEPS_PROVIDERS_GUARD_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "providers/http.h"
#include "providers/limits.h"
#include "providers/provider.h"

namespace steps {

// What one answer said of the server's limits: OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} and Anthropic's
// anthropic-ratelimit-{requests,tokens,input-tokens}-{limit,remaining,reset}.
// Resets are durations ("1s", "6m0s", "20ms") or RFC 3339 times, read
// against `now`.
struct RateLimitHint {
  std::optional<int64_t> request_limit;
  std::optional<int64_t> requests_remaining;
  std::optional<Millis> requests_reset;
  std::optional<int64_t> token_limit;
  std::optional<int64_t> tokens_remaining;
  std::optional<Millis> tokens_reset;

  bool empty() const;
};
RateLimitHint ParseRateLimitHeaders(const HttpHeaders& headers, WallTime now);

// A duration as Go prints it and OpenAI sends it: "1s", "6m0s", "1h2m3.5s",
// "20ms", "0.5s". Nullopt when it is not one.
std::optional<Millis> ParseGoDuration(std::string_view text);

// How a wait for admission ended.
struct Admission {
  Millis waited{0};
  std::string why;  // What was waited for, when anything was.
  std::optional<ProviderError> error;  // Set when the request may not go.
};

// Sleepers a state change wakes: each waits on a child of its call's
// cancel token, which Wake cancels.
class WakeList {
 public:
  // REQUIRES: the owner's lock held.
  CancelToken Add(const CancelToken& parent);
  void Remove(const CancelToken& token);
  // Takes every sleeper off the list; cancel them outside the lock.
  std::vector<CancelToken> TakeAll();

 private:
  std::vector<CancelToken> sleepers_;
};

// One source's rate limits, shared by every conversation of a run that
// sends to it. Thread-safe.
class RateLimiter {
 public:
  explicit RateLimiter(RateLimitSpec spec);

  // The limits in force: the declared ones, tightened by what the server's
  // headers announced.
  RateLimitSpec Effective() const;
  // Tightens the declared limits (another declaration of the same source).
  void Tighten(const RateLimitSpec& spec);

  // Waits until a request of about `tokens` may start, then counts it.
  Admission Acquire(int64_t tokens, const CallContext& context);
  // The request admitted by Acquire ended; `used` is what its answer
  // reported (total tokens), when it did.
  void Release(int64_t estimated, std::optional<int64_t> used, SteadyTime now);
  // What an answer's headers said; tightens the limits and the window.
  void Observe(const RateLimitHint& hint, SteadyTime now);
  // A 429 asked to wait: no request starts before `until`.
  void HoldUntil(SteadyTime until, SteadyTime now);

 private:
  // When a request of `tokens` may start, seen at `now`; nullopt while it
  // waits for a request in flight to end. Sets *why. REQUIRES: mu_.
  std::optional<SteadyTime> ReadyAt(int64_t tokens, SteadyTime now,
                                    std::string* why) const;
  void Admit(int64_t tokens, SteadyTime now);  // REQUIRES: mu_.
  int64_t RequestsPerMinute() const;           // REQUIRES: mu_.
  int64_t TokensPerMinute() const;             // REQUIRES: mu_.

  mutable std::mutex mu_;
  RateLimitSpec spec_;
  RateLimitHint server_;  // The last answer's limits.
  std::optional<SteadyTime> requests_reset_at_;
  std::optional<SteadyTime> tokens_reset_at_;
  int64_t in_flight_ = 0;
  std::optional<SteadyTime> next_request_;  // Evenly spread requests.
  std::optional<SteadyTime> next_tokens_;   // Evenly spread tokens.
  std::optional<SteadyTime> hold_until_;
  WakeList wake_;
};

// The retry budget of one host: a call may retry while the retries
// granted to the host in the last kWindow are fewer than
// max(min_retries, ratio * calls), the calls being those that started in
// the window or are still in flight. So a burst of N calls that all fail
// retries at most max(min_retries, ratio * N) times, however its retries
// are timed, and steady traffic retries at most that share of it.
// Thread-safe.
class RetryBudget {
 public:
  static constexpr Millis kWindow{10000};

  // Counts a call starting at `now`; pass the same time to CallEnded.
  void CallStarted(SteadyTime now);
  // Whether a retry may go out at `now`; when it may, it is counted.
  bool TryRetry(const RetryBudgetSpec& spec, SteadyTime now);
  void CallEnded(SteadyTime started);
  // For messages: the calls and the retries the budget counts at `now`.
  std::pair<int64_t, int64_t> Load(SteadyTime now);

 private:
  void Prune(SteadyTime now);           // REQUIRES: mu_.
  int64_t Calls(SteadyTime now) const;  // REQUIRES: mu_, pruned.

  std::mutex mu_;
  std::deque<SteadyTime> starts_;        // Calls started in the window.
  std::multiset<SteadyTime> in_flight_;  // Start times of calls running.
  std::deque<SteadyTime> grants_;        // Retries granted in the window.
};

// How a request's end counts for a circuit.
enum class CircuitVerdict {
  kOk,       // The server answered (any answer but an outage's).
  kOutage,   // Connection failure, timeout, 5xx, malformed or cut stream.
  kNeutral,  // Nothing learnt (cancelled, deadline, refused before sending).
};
CircuitVerdict ClassifyForCircuit(const ChatResult& result);

// The circuit breaker of one host. Thread-safe.
class Circuit {
 public:
  explicit Circuit(std::string host) : host_(std::move(host)) {}

  // While the circuit is open, waits (bounded by the call's deadline) for a
  // probe to close it, or becomes the probe itself when one is due: then
  // *probe is set and the caller must Record its request's verdict.
  Admission Admit(const CallContext& context, bool* probe);
  void Record(const CircuitSpec& spec, CircuitVerdict verdict, bool probe,
              const CallContext& context);
  bool open() const;

 private:
  const std::string host_;
  mutable std::mutex mu_;
  int64_t failures_ = 0;  // Consecutive outages.
  bool open_ = false;
  bool probe_out_ = false;
  SteadyTime next_probe_{};
  WakeList wake_;
};

// What one host's calls share.
struct HostHealth {
  explicit HostHealth(std::string host) : circuit(std::move(host)) {}
  RetryBudget budget;
  Circuit circuit;
};

// The guards of one run, made on first use. Thread-safe; the pointers live
// as long as this object.
class HostGuards {
 public:
  // The limiter of the source `key` (its endpoint, model and key variable),
  // tightened by `spec` when it exists already.
  RateLimiter* Limiter(const std::string& key, const RateLimitSpec& spec);
  // The health of the host at `base_url` ("https://api.openai.com/v1").
  HostHealth* Health(const std::string& base_url);

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<RateLimiter>> limiters_;
  std::map<std::string, std::unique_ptr<HostHealth>> hosts_;
};

// "api.openai.com" for "https://api.openai.com/v1", "127.0.0.1:8080" for
// "http://127.0.0.1:8080/": how logs name a host.
std::string HostOf(const std::string& base_url);

// A single-request Provider behind a rate limiter and a circuit breaker
// (either may be null). Answers and errors carry the time waited
// (ChatAnswer::waited, ProviderError::waited); an error before sending
// carries requests = 0.
class GuardedProvider : public Provider {
 public:
  struct Guards {
    RateLimiter* limiter = nullptr;
    Circuit* circuit = nullptr;
    CircuitSpec circuit_spec;
    std::string host;  // For log lines.
  };
  // `inner` is not owned and must outlive this object.
  GuardedProvider(Provider& inner, Guards guards);

  ChatResult Send(const ChatRequest& request,
                  const CallContext& context) override;

 private:
  void LogWait(const CallContext& context, Millis waited,
               const std::string& why) const;

  Provider& inner_;
  Guards guards_;
};

// A request's tokens as a limiter counts them before the answer says:
// about a token per four bytes of its messages, plus its max_tokens.
int64_t EstimateTokens(const ChatRequest& request);

}  // namespace steps

#endif  // STEPS_PROVIDERS_GUARD_H_
