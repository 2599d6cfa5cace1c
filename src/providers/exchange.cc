#include "providers/exchange.h"

#include <cctype>
#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>

namespace steps {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<double> ParseNonNegativeNumber(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') {
      return std::nullopt;
    }
  }
  try {
    return std::stod(std::string(s));
  } catch (...) {
    return std::nullopt;
  }
}

// IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
std::optional<WallTime> ParseHttpDate(std::string_view s) {
  std::tm tm{};
  std::string text(Trim(s));
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

// The body's own account of the failure, when it has one.
std::string ErrorDetail(const std::string& body) {
  auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_object() && json.contains("error")) {
    const auto& e = json["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  std::string snippet = body.substr(0, 200);
  for (char& c : snippet) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return std::string(Trim(snippet));
}

}  // namespace

std::optional<Millis> ParseRetryAfter(const HttpHeaders& headers,
                                      WallTime now) {
  if (auto ms = FindHeader(headers, "retry-after-ms")) {
    if (auto v = ParseNonNegativeNumber(*ms)) {
      return Millis(static_cast<int64_t>(*v));
    }
  }
  if (auto ra = FindHeader(headers, "retry-after")) {
    if (auto v = ParseNonNegativeNumber(*ra)) {
      return Millis(static_cast<int64_t>(*v * 1000));
    }
    if (auto date = ParseHttpDate(*ra)) {
      if (*date <= now) return Millis(0);
      return std::chrono::ceil<Millis>(*date - now);
    }
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
    }
  }
  HttpResponse& response = result.response();
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
