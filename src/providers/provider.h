// The Provider seam: send one chat request, get back a typed answer or a
// classified error. Adapters (OpenAI-compatible, Anthropic, the in-process
// mock) implement it for exactly one HTTP request; RetryingProvider
// (providers/retry.h) wraps any of them with the request-retry policy.
#ifndef STEPS_PROVIDERS_PROVIDER_H_
#define STEPS_PROVIDERS_PROVIDER_H_

#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/trace.h"
#include "providers/chat.h"
#include "providers/http.h"

namespace steps {

// Why a request produced no answer. The kind decides whether another try may
// help (IsRetryable) and how the step ends.
enum class ProviderErrorKind {
  kConnection,     // Could not connect, connection reset, or closed with no
                   // answer (a "drop"). Retryable.
  kTimeout,        // The request's own limit (llm_timeout) passed while the
                   // step's deadline had not. Retryable.
  kHttpStatus,     // The server answered a non-2xx status; see http_status.
  kMalformed,      // A 2xx answer that is not the expected format. Retryable:
                   // proxies in front of providers produce these transiently.
  kStreamIdle,     // A streamed answer went silent past the idle limit.
                   // Retryable.
  kStreamError,    // An error event in a stream before any output. Retryable.
  kNoDescriptors,  // No file descriptor left for a socket (EMFILE/ENFILE);
                   // the server was never tried. Retryable: descriptors
                   // free up as other conversations end.
  kTooLarge,       // The answer exceeded the response size bound. Final.
  kDeadline,       // The step's deadline passed (or leaves no room for the
                   // wait the server asked for). Final.
  kCancelled,      // The caller's CancelToken was cancelled. Final.
  kConfig,         // Bad source configuration (missing key, unknown
                   // provider). Final.
  kRateLimited,    // A client-side rate limit (providers/guard.h) would
                   // hold the request past the step's deadline; nothing was
                   // sent. Final, as a 429 whose wait does not fit.
  kCircuitOpen,    // The host's circuit (providers/guard.h) is open and no
                   // probe can go before the step's deadline; nothing was
                   // sent. Final: a fallback source takes over.
};

// "connection", "timeout", "http_status", "malformed", "stream_idle",
// "stream_error", "no_descriptors", "too_large", "deadline", "cancelled",
// "config", "rate_limited", "circuit_open".
const char* ProviderErrorKindName(ProviderErrorKind kind);

// Retryable HTTP statuses: 408, 409, 429 and every 5xx (529 included).
// Every other non-2xx status is final (400, 401, 403, 404, 422, ...).
bool IsRetryableHttpStatus(int status);

struct ProviderError {
  ProviderErrorKind kind = ProviderErrorKind::kConnection;
  // kHttpStatus: the status; otherwise 0.
  int http_status = 0;
  // What the server asked us to wait before retrying (Retry-After or
  // retry-after-ms), when it said.
  std::optional<Millis> retry_after;
  // For people; never contains an API key.
  std::string message;
  // HTTP requests spent before giving up (set by RetryingProvider; 1 for a
  // single request, 0 when nothing was sent).
  int requests = 1;
  // Time spent waiting for rate limits and an open circuit before sending.
  Millis waited{0};
  // The retry budget (providers/guard.h) refused the retry this error
  // would have had.
  bool retry_denied = false;

  bool retryable() const;
  // The value of the `status=` field in retry log lines: the HTTP status,
  // or the kind's name for failures without one.
  std::string StatusLabel() const;
  // As a Status: kDeadlineExceeded, kCancelled, kInvalidArgument (config,
  // final statuses) or kUnavailable (everything the engine reports as the
  // machinery failing).
  Status ToStatus() const;
};

// A ChatAnswer or the ProviderError that explains why there is none.
class ChatResult {
 public:
  ChatResult(ChatAnswer answer) : data_(std::move(answer)) {}   // NOLINT
  ChatResult(ProviderError error) : data_(std::move(error)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<ChatAnswer>(data_); }
  // REQUIRES: ok().
  ChatAnswer& answer() { return std::get<ChatAnswer>(data_); }
  const ChatAnswer& answer() const { return std::get<ChatAnswer>(data_); }
  // REQUIRES: !ok().
  ProviderError& error() { return std::get<ProviderError>(data_); }
  const ProviderError& error() const { return std::get<ProviderError>(data_); }

 private:
  std::variant<ChatAnswer, ProviderError> data_;
};

// Everything about one call that is not the request itself: limits, time,
// cancellation and the labels sent as headers and logged.
struct CallContext {
  // All waits and deadline checks read this clock. Not owned; must outlive
  // the call. Default: RealClock().
  Clock* clock = &RealClock();
  // The step's absolute deadline, shared by every request and backoff wait.
  // None = no deadline (an agent with timeout: "0").
  Deadline deadline;
  // Cancelling it cuts a transfer in flight (within 50 ms) and any backoff
  // wait; the call then fails with kCancelled.
  CancelToken cancel;
  // Upper bound on one HTTP request (the agent's llm_timeout). Zero = none.
  // A request's time limit is the smaller of this and the time left until
  // `deadline`; running out of the first is kTimeout (retryable), of the
  // second kDeadline (final).
  Millis llm_timeout{0};
  // Sent as X-Steps-Agent / X-Steps-Step and used in log lines.
  std::string agent;
  std::string step;
  // Requests the conversation has already sent before this call; only used
  // for provider_requests= in the give-up log line.
  int prior_requests = 0;
  // Whether RetryingProvider logs agent.conversation_failed when it gives
  // up. A caller that will fall back to another source may turn it off and
  // log once itself.
  bool log_give_up = true;
  // Receives each log line the call writes (agent.request_retry, ...), as
  // formatted for the process log, which gets it too. Optional.
  std::function<void(const std::string& line)> on_log;
  // Receives the headers of every HTTP answer (any status), before it is
  // read: how a rate limiter learns the server's limits. Optional.
  std::function<void(const HttpHeaders& headers)> on_response_headers;
  // The span each request's span goes under (the conversation's), and the
  // provider's name for gen_ai.provider.name ("openai", "anthropic").
  trace::SpanContext trace_parent;
  std::string provider_name;

  // The time limit of one request made now: min(llm_timeout, time left),
  // or nullopt when neither applies. Zero when the deadline has passed.
  std::optional<Millis> RequestLimit() const;
  // True when the request limit is the step's deadline (not llm_timeout),
  // i.e. running out of it ends the step.
  bool LimitIsDeadline() const;
};

// Sends chat requests for one source (one provider endpoint and key).
//
// Thread-safety: Send may be called concurrently from many threads on one
// Provider; implementations keep no per-call state in members.
// Blocking: Send blocks the calling thread until the answer, an error, the
// time limit or cancellation, whichever is first.
class Provider {
 public:
  virtual ~Provider() = default;
  // One request (adapters) or one request with retries (RetryingProvider).
  // Never throws.
  virtual ChatResult Send(const ChatRequest& request,
                          const CallContext& context) = 0;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_PROVIDER_H_
