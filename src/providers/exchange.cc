#include "providers/exchange.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/trim.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

// The longest wait read from Retry-After or retry-after-ms; anything longer
// (99999999999999999999999, a 40-digit number, a date in year 9999) is read
// as this, which is past any deadline and past max_server_wait.
constexpr Millis kMaxRetryAfter = std::chrono::hours(24 * 365);

// A non-negative decimal number (digits and at most one '.'), clamped to
// kMaxRetryAfter once scaled to milliseconds by `ms_per_unit`.
std::optional<Millis> ParseWaitNumber(std::string_view s, double ms_per_unit) {
  s = TrimSpace(s);
  if (s.empty() || s == "." || s.size() > 400) return std::nullopt;
  int dots = 0;
  for (char c : s) {
    if (c == '.' && ++dots > 1) return std::nullopt;
    if (c != '.' && !std::isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  // strtod saturates to HUGE_VAL rather than failing; the clamp below
  // keeps every later sum and cast in range.
  double v = std::strtod(std::string(s).c_str(), nullptr) * ms_per_unit;
  const double max = static_cast<double>(kMaxRetryAfter.count());
  if (!(v < max)) return kMaxRetryAfter;
  return Millis(static_cast<int64_t>(std::ceil(v)));
}

// IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT", as a wait from `now`
// (zero when past, at most kMaxRetryAfter).
std::optional<Millis> ParseHttpDateWait(std::string_view s, WallTime now) {
  std::tm tm{};
  std::string text(TrimSpace(s));
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  // Compared in seconds: a far date as a system_clock time point overflows.
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch())
          .count();
  const int64_t max_s =
      std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
  if (static_cast<int64_t>(t) <= now_s) return Millis(0);
  if (static_cast<int64_t>(t) - now_s >= max_s) return kMaxRetryAfter;
  WallTime date = std::chrono::system_clock::from_time_t(t);
  return std::chrono::ceil<Millis>(date - now);
}

// The body's own account of the failure, when it has one.
std::string ErrorDetail(const std::string& body) {
  std::optional<nlohmann::json> json = ParseWireJson(body);
  if (json && json->is_object() && json->contains("error")) {
    const auto& e = (*json)["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  std::string snippet = body.substr(0, 200);
  for (char& c : snippet) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return std::string(TrimSpace(snippet));
}

}  // namespace

std::optional<Millis> ParseRetryAfter(const HttpHeaders& headers,
                                      WallTime now) {
  if (auto ms = FindHeader(headers, "retry-after-ms")) {
    if (auto wait = ParseWaitNumber(*ms, 1.0)) return wait;
  }
  if (auto ra = FindHeader(headers, "retry-after")) {
    if (auto wait = ParseWaitNumber(*ra, 1000.0)) return wait;
    return ParseHttpDateWait(*ra, now);
  }
  return std::nullopt;
}

std::string Redact(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), "[redacted]");
    pos += 10;
  }
  return text;
}

ProviderError MakeProviderError(ProviderErrorKind kind, std::string message,
                                std::string_view secret) {
  ProviderError e;
  e.kind = kind;
  e.message = Redact(std::move(message), secret);
  return e;
}

ExchangeResult PostWithin(HttpTransport& transport, const HttpRequest& request,
                          const CallContext& context,
                          const ExchangeOptions& options) {
  if (context.cancel.cancelled()) {
    ProviderError e =
        MakeProviderError(ProviderErrorKind::kCancelled, "request cancelled");
    e.requests = 0;
    return e;
  }
  if (context.deadline.Expired(*context.clock)) {
    ProviderError e = MakeProviderError(ProviderErrorKind::kDeadline,
                                        kContextDeadlineExceeded);
    e.requests = 0;
    return e;
  }
  TransferOptions transfer;
  transfer.time_limit = context.RequestLimit();
  transfer.idle_limit = options.idle_limit;
  transfer.max_response_bytes = options.max_response_bytes;
  transfer.cancel = context.cancel;
  transfer.reader = options.reader;
  const bool limit_is_deadline = context.LimitIsDeadline();

  TransportResult result = transport.Post(request, transfer);
  if (!result.ok()) {
    const TransportError& te = result.error();
    switch (te.kind) {
      case TransportErrorKind::kConnect:
      case TransportErrorKind::kClosed:
      case TransportErrorKind::kOther:
        return MakeProviderError(ProviderErrorKind::kConnection,
                                 "connection error: " + te.message,
                                 options.secret);
      case TransportErrorKind::kTimedOut:
        if (limit_is_deadline) {
          return MakeProviderError(ProviderErrorKind::kDeadline,
                                   kContextDeadlineExceeded);
        }
        return MakeProviderError(ProviderErrorKind::kTimeout,
                                 "request timed out (llm_timeout " +
                                     FormatDuration(context.llm_timeout) + ")");
      case TransportErrorKind::kIdle:
        return MakeProviderError(ProviderErrorKind::kStreamIdle,
                                 "stream cut: " + te.message);
      case TransportErrorKind::kCancelled:
        return MakeProviderError(ProviderErrorKind::kCancelled,
                                 "request cancelled");
      case TransportErrorKind::kTooLarge:
        return MakeProviderError(ProviderErrorKind::kTooLarge, te.message);
      case TransportErrorKind::kNoDescriptors:
        return MakeProviderError(ProviderErrorKind::kNoDescriptors, te.message);
      case TransportErrorKind::kUnavailable:
        return MakeProviderError(ProviderErrorKind::kConfig, te.message);
    }
  }
  HttpResponse& response = result.response();
  if (context.on_response_headers)
    context.on_response_headers(response.headers);
  if (response.status < 200 || response.status > 299) {
    ProviderError e =
        MakeProviderError(ProviderErrorKind::kHttpStatus,
                          "HTTP " + std::to_string(response.status) + ": " +
                              ErrorDetail(response.body),
                          options.secret);
    e.http_status = response.status;
    e.retry_after = ParseRetryAfter(response.headers, context.clock->WallNow());
    return e;
  }
  return std::move(response);
}

}  // namespace steps
