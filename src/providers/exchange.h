// One HTTP exchange for an adapter, and the one place where transport
// failures and HTTP statuses become ProviderErrors.
#ifndef STEPS_PROVIDERS_EXCHANGE_H_
#define STEPS_PROVIDERS_EXCHANGE_H_

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "core/clock.h"
#include "providers/http.h"
#include "providers/provider.h"

namespace steps {

// The server's requested wait: `retry-after-ms` (milliseconds) wins over
// `Retry-After` (delta-seconds, possibly fractional, or an HTTP date read
// against `now`). Nullopt when neither is present or parses; a date in the
// past is a wait of zero. Any size is safe: a wait over a year (a 40-digit
// number, a date in year 9999) is read as one year, which no deadline or
// max_server_wait allows, so the call gives up at once.
std::optional<Millis> ParseRetryAfter(const HttpHeaders& headers, WallTime now);

// Replaces every occurrence of `secret` (when non-empty) with "[redacted]".
std::string Redact(std::string text, std::string_view secret);

// The message a step reports when its deadline cuts a request.
inline constexpr const char* kContextDeadlineExceeded =
    "context deadline exceeded";

struct ExchangeOptions {
  // Never appears in errors (redacted).
  std::string secret;
  // For streamed answers; see TransferOptions.
  Millis idle_limit{0};
  size_t max_response_bytes = 32 * 1024 * 1024;
  BodyReader reader;
};

using ExchangeResult = std::variant<HttpResponse, ProviderError>;

// Sends `request` within the context's limits: refuses at once (requests=0)
// when the deadline has passed or the call is cancelled, gives the transfer
// CallContext::RequestLimit(), and classifies every failure, including a
// non-2xx status (message from the body's error.message when it has one,
// Retry-After parsed).
ExchangeResult PostWithin(HttpTransport& transport, const HttpRequest& request,
                          const CallContext& context,
                          const ExchangeOptions& options);

// An error of `kind` with a redacted message.
ProviderError MakeProviderError(ProviderErrorKind kind, std::string message,
                                std::string_view secret = {});

}  // namespace steps

#endif  // STEPS_PROVIDERS_EXCHANGE_H_
