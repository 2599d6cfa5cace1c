#include "providers/guard.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/log.h"

namespace steps {
namespace {

// How long a wait with nothing to wait for but a wake sleeps between
// looks at the call's state (cancellation and deadline wake it anyway).
constexpr Millis kLongSleep{3600 * 1000};
// No wait or hold is ever longer than a year: a server's reset or usage
// figure, however large, stays far from the clock's range.
constexpr Millis kMaxWait{int64_t{365} * 24 * 3600 * 1000};
// Without a deadline, a wait longer than this is refused, as a server's
// Retry-After is (RetryPolicy::max_server_wait).
constexpr Millis kMaxOpenEndedWait{10 * 60 * 1000};

SteadyTime Capped(SteadyTime t, SteadyTime now) {
  return std::min(t, now + kMaxWait);
}

void Log(const CallContext& context, LogLevel level, std::string_view event,
         std::vector<LogField> fields) {
  if (context.on_log) context.on_log(FormatLogEvent(level, event, fields));
  LogEvent(level, event, fields);
}

void WakeAll(std::vector<CancelToken> sleepers) {
  for (const CancelToken& t : sleepers) t.Cancel(CancelReason::kParent);
}

std::optional<int64_t> ParseCount(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  int64_t v = 0;
  const char* end = text->data() + text->size();
  auto [p, ec] = std::from_chars(text->data(), end, v);
  if (ec != std::errc() || p != end || v < 0) return std::nullopt;
  return v;
}

// "2026-12-06T18:00:00Z" (or with fractional seconds, or an offset) as a
// wait from `now`; a time in the past is zero.
std::optional<Millis> ParseRfc3339Wait(const std::string& text, WallTime now) {
  int y, mo, d, h, mi;
  double s;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%n", &y, &mo, &d, &h,
                  &mi, &s, &consumed) != 6) {
    return std::nullopt;
  }
  std::string_view zone = std::string_view(text).substr(consumed);
  int offset_min = 0;
  if (zone == "Z" || zone == "z") {
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') &&
             zone[3] == ':') {
    int zh = 0, zm = 0;
    if (std::sscanf(std::string(zone).c_str() + 1, "%2d:%2d", &zh, &zm) != 2) {
      return std::nullopt;
    }
    offset_min = (zone[0] == '+' ? 1 : -1) * (zh * 60 + zm);
  } else {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s < 0 ||
      s >= 61 || y < 1970 || y > 9999) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  const time_t t = timegm(&tm);
  const double at_ms = (static_cast<double>(t) - offset_min * 60.0 + s) * 1e3;
  const double now_ms = static_cast<double>(
      std::chrono::duration_cast<Millis>(now.time_since_epoch()).count());
  const double wait =
      std::clamp(at_ms - now_ms, 0.0, static_cast<double>(kMaxWait.count()));
  return Millis(static_cast<int64_t>(wait));
}

// A bare number, as some servers send a reset: seconds from now, or, from
// 1e9 on (2001 and later), a Unix time.
std::optional<Millis> ParseSecondsWait(std::string_view text, WallTime now) {
  double value = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || p != text.data() + text.size() || !(value >= 0)) {
    return std::nullopt;
  }
  double wait_ms = value * 1e3;
  if (value >= 1e9) {
    wait_ms -= static_cast<double>(
        std::chrono::duration_cast<Millis>(now.time_since_epoch()).count());
  }
  wait_ms = std::clamp(wait_ms, 0.0, static_cast<double>(kMaxWait.count()));
  return Millis(static_cast<int64_t>(std::ceil(wait_ms)));
}

std::optional<Millis> ParseReset(const std::optional<std::string>& text,
                                 WallTime now) {
  if (!text) return std::nullopt;
  if (auto d = ParseGoDuration(*text)) return d;
  if (auto d = ParseSecondsWait(*text, now)) return d;
  return ParseRfc3339Wait(*text, now);
}

// Milliseconds per unit for "ms", "s", "m", "h" (and "us", "ns", read as
// fractions); 0 for anything else.
double UnitMs(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1e3;
  if (unit == "m") return 60e3;
  if (unit == "h") return 3600e3;
  if (unit == "us" || unit == "µs") return 1e-3;
  if (unit == "ns") return 1e-6;
  return 0;
}

Millis Interval(int64_t per_minute, int64_t amount) {
  // 60,000 ms per minute, shared out evenly.
  const double ms =
      60000.0 * static_cast<double>(amount) / static_cast<double>(per_minute);
  return Millis(static_cast<int64_t>(
      std::ceil(std::min(ms, static_cast<double>(kMaxWait.count())))));
}

int64_t MinNonZero(int64_t a, int64_t b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return std::min(a, b);
}

ProviderError GuardError(ProviderErrorKind kind, std::string message) {
  ProviderError e;
  e.kind = kind;
  e.message = std::move(message);
  e.requests = 0;
  return e;
}

// Sleeps on the call's clock until `until` or a wake. Returns an error
// when the call is cancelled.
std::optional<ProviderError> Sleep(const CallContext& context, SteadyTime until,
                                   const CancelToken& wake) {
  context.clock->SleepUntil(until, wake);
  if (context.cancel.cancelled()) {
    return GuardError(ProviderErrorKind::kCancelled,
                      "cancelled while waiting to send");
  }
  return std::nullopt;
}

// What one look of a guard's wait decided: it is over (admitted, or
// refused with the Admission's error), or it sleeps until a time (or a
// wake) and looks again.
struct Turn {
  static Turn Done() { return {true, {}}; }
  static Turn SleepUntil(SteadyTime t) { return {false, t}; }
  bool done;
  SteadyTime until;
};

// A guard's wait: `look(now, out)` under `mu` until it says Done, sleeping
// between looks on the call's clock (woken early through `wakes`, cut by
// cancellation). `out.waited` is kept up to date before each look.
template <typename Look>
Admission WaitTurns(std::mutex& mu, WakeList& wakes, const CallContext& context,
                    Look look) {
  Clock& clock = *context.clock;
  const SteadyTime start = clock.Now();
  Admission out;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    const SteadyTime now = clock.Now();
    out.waited = std::chrono::duration_cast<Millis>(now - start);
    const Turn turn = look(now, out);
    if (turn.done) return out;
    CancelToken wake = wakes.Add(context.cancel);
    lock.unlock();
    std::optional<ProviderError> cut = Sleep(context, turn.until, wake);
    lock.lock();
    wakes.Remove(wake);
    if (cut) {
      out.error = std::move(cut);
      return out;
    }
  }
}

}  // namespace

bool RateLimitHint::empty() const {
  return !request_limit && !requests_remaining && !requests_reset &&
         !token_limit && !tokens_remaining && !tokens_reset;
}

std::optional<Millis> ParseGoDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (
        i < text.size() &&
        (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == start) return std::nullopt;
    double value = 0;
    auto [p, ec] = std::from_chars(text.data() + start, text.data() + i, value);
    if (ec != std::errc() || p != text.data() + i) return std::nullopt;
    size_t unit_start = i;
    while (i < text.size() &&
           !std::isdigit(static_cast<unsigned char>(text[i])) &&
           text[i] != '.') {
      ++i;
    }
    const double per = UnitMs(text.substr(unit_start, i - unit_start));
    if (per == 0) return std::nullopt;
    total += value * per;
    if (total > 1e12) return std::nullopt;
  }
  return std::min(Millis(static_cast<int64_t>(std::ceil(total))), kMaxWait);
}

RateLimitHint ParseRateLimitHeaders(const HttpHeaders& headers, WallTime now) {
  RateLimitHint h;
  auto get = [&](const char* name) { return FindHeader(headers, name); };
  h.request_limit = ParseCount(get("x-ratelimit-limit-requests"));
  h.requests_remaining = ParseCount(get("x-ratelimit-remaining-requests"));
  h.requests_reset = ParseReset(get("x-ratelimit-reset-requests"), now);
  h.token_limit = ParseCount(get("x-ratelimit-limit-tokens"));
  h.tokens_remaining = ParseCount(get("x-ratelimit-remaining-tokens"));
  h.tokens_reset = ParseReset(get("x-ratelimit-reset-tokens"), now);
  if (!h.request_limit) {
    h.request_limit = ParseCount(get("anthropic-ratelimit-requests-limit"));
  }
  if (!h.requests_remaining) {
    h.requests_remaining =
        ParseCount(get("anthropic-ratelimit-requests-remaining"));
  }
  if (!h.requests_reset) {
    h.requests_reset =
        ParseReset(get("anthropic-ratelimit-requests-reset"), now);
  }
  // Anthropic's tokens-* is the most restrictive of its token limits;
  // input-tokens-* is what a request spends before its answer.
  for (const char* family : {"tokens", "input-tokens"}) {
    const std::string base = std::string("anthropic-ratelimit-") + family;
    if (!h.token_limit)
      h.token_limit = ParseCount(get((base + "-limit").c_str()));
    if (!h.tokens_remaining) {
      h.tokens_remaining = ParseCount(get((base + "-remaining").c_str()));
    }
    if (!h.tokens_reset) {
      h.tokens_reset = ParseReset(get((base + "-reset").c_str()), now);
    }
  }
  return h;
}

// --- WakeList ---------------------------------------------------------------

CancelToken WakeList::Add(const CancelToken& parent) {
  sleepers_.push_back(parent.Child());
  return sleepers_.back();
}

void WakeList::Remove(const CancelToken& token) {
  // Tokens compare by identity of their shared state: a cancelled copy is
  // the one to drop. Wakes take the whole list, so this finds it or not.
  for (size_t i = 0; i < sleepers_.size(); ++i) {
    if (sleepers_[i].SameAs(token)) {
      sleepers_[i] = std::move(sleepers_.back());
      sleepers_.pop_back();
      return;
    }
  }
}

std::vector<CancelToken> WakeList::TakeAll() {
  std::vector<CancelToken> out;
  out.swap(sleepers_);
  return out;
}

// --- RateLimitSpec ----------------------------------------------------------

RateLimitSpec RateLimitSpec::Tighter(const RateLimitSpec& other) const {
  RateLimitSpec s;
  s.max_concurrent = MinNonZero(max_concurrent, other.max_concurrent);
  s.requests_per_minute =
      MinNonZero(requests_per_minute, other.requests_per_minute);
  s.tokens_per_minute = MinNonZero(tokens_per_minute, other.tokens_per_minute);
  return s;
}

// --- RateLimiter ------------------------------------------------------------

RateLimiter::RateLimiter(RateLimitSpec spec) : spec_(spec) {}

RateLimitSpec RateLimiter::Effective() const {
  std::lock_guard<std::mutex> lock(mu_);
  RateLimitSpec s = spec_;
  s.requests_per_minute = RequestsPerMinute();
  s.tokens_per_minute = TokensPerMinute();
  return s;
}

void RateLimiter::Tighten(const RateLimitSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  spec_ = spec_.Tighter(spec);
}

int64_t RateLimiter::RequestsPerMinute() const {
  return MinNonZero(spec_.requests_per_minute,
                    server_.request_limit.value_or(0));
}

int64_t RateLimiter::TokensPerMinute() const {
  return MinNonZero(spec_.tokens_per_minute, server_.token_limit.value_or(0));
}

std::optional<SteadyTime> RateLimiter::ReadyAt(int64_t tokens, SteadyTime now,
                                               std::string* why) const {
  if (spec_.max_concurrent > 0 && in_flight_ >= spec_.max_concurrent) {
    *why = "max_concurrent";
    return std::nullopt;
  }
  SteadyTime at = now;
  auto later = [&](std::optional<SteadyTime> t, const char* what) {
    if (t && *t > at) {
      at = *t;
      *why = what;
    }
  };
  later(hold_until_, "retry_after");
  if (requests_reset_at_ && server_.requests_remaining &&
      *server_.requests_remaining <= 0) {
    later(requests_reset_at_, "server_requests");
  }
  if (tokens_reset_at_ && server_.tokens_remaining &&
      *server_.tokens_remaining < std::max<int64_t>(tokens, 1)) {
    later(tokens_reset_at_, "server_tokens");
  }
  if (RequestsPerMinute() > 0) later(next_request_, "requests_per_minute");
  if (TokensPerMinute() > 0) later(next_tokens_, "tokens_per_minute");
  return at;
}

void RateLimiter::Admit(int64_t tokens, SteadyTime now) {
  ++in_flight_;
  if (int64_t rpm = RequestsPerMinute(); rpm > 0) {
    next_request_ = Capped(
        std::max(now, next_request_.value_or(now)) + Interval(rpm, 1), now);
  }
  if (int64_t tpm = TokensPerMinute(); tpm > 0) {
    next_tokens_ = Capped(std::max(now, next_tokens_.value_or(now)) +
                              Interval(tpm, std::max<int64_t>(tokens, 1)),
                          now);
  }
  if (server_.requests_remaining && *server_.requests_remaining > 0) {
    --*server_.requests_remaining;
  }
  if (server_.tokens_remaining) {
    *server_.tokens_remaining =
        std::max<int64_t>(0, *server_.tokens_remaining - tokens);
  }
}

Admission RateLimiter::Acquire(int64_t tokens, const CallContext& context) {
  Clock& clock = *context.clock;
  const Deadline& deadline = context.deadline;
  return WaitTurns(mu_, wake_, context, [&](SteadyTime now, Admission& out) {
    std::string why;
    std::optional<SteadyTime> ready = ReadyAt(tokens, now, &why);
    if (ready && *ready <= now) {
      Admit(tokens, now);
      return Turn::Done();
    }
    out.why = why;
    if (ready && !deadline.is_set() && *ready - now > kMaxOpenEndedWait) {
      out.error = GuardError(
          ProviderErrorKind::kRateLimited,
          "rate limit (" + why + "): the next request may start in " +
              FormatDuration(std::chrono::duration_cast<Millis>(*ready - now)) +
              ", longer than " + FormatDuration(kMaxOpenEndedWait) +
              " (the step has no deadline)");
      return Turn::Done();
    }
    if (ready && deadline.is_set() && *ready >= deadline.at()) {
      out.error = GuardError(
          ProviderErrorKind::kRateLimited,
          "rate limit (" + why + "): the next request may start in " +
              FormatDuration(std::chrono::duration_cast<Millis>(*ready - now)) +
              " but the deadline is " +
              FormatDuration(*deadline.Remaining(clock)) + " away");
      return Turn::Done();
    }
    if (deadline.Expired(clock)) {
      out.error = GuardError(ProviderErrorKind::kDeadline,
                             "context deadline exceeded (waiting for a "
                             "request slot: max_concurrent " +
                                 std::to_string(spec_.max_concurrent) + ")");
      return Turn::Done();
    }
    return Turn::SleepUntil(
        ready.value_or(deadline.is_set() ? deadline.at() : now + kLongSleep));
  });
}

void RateLimiter::Release(int64_t estimated, std::optional<int64_t> used,
                          SteadyTime now) {
  std::vector<CancelToken> sleepers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ > 0) --in_flight_;
    int64_t tpm = TokensPerMinute();
    if (used && tpm > 0 && next_tokens_ && *used != estimated) {
      // Settle the estimate: what the answer reports is what was spent.
      const int64_t diff = *used - estimated;
      const Millis d = Interval(tpm, diff > 0 ? diff : -diff);
      next_tokens_ = diff > 0 ? Capped(*next_tokens_ + d, now)
                              : std::max(*next_tokens_ - d, now - kMaxWait);
    }
    sleepers = wake_.TakeAll();
  }
  WakeAll(std::move(sleepers));
}

void RateLimiter::Observe(const RateLimitHint& hint, SteadyTime now) {
  if (hint.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (hint.request_limit && *hint.request_limit > 0) {
    server_.request_limit = hint.request_limit;
  }
  if (hint.token_limit && *hint.token_limit > 0) {
    server_.token_limit = hint.token_limit;
  }
  if (hint.requests_remaining) {
    server_.requests_remaining = hint.requests_remaining;
    requests_reset_at_ = now + hint.requests_reset.value_or(Millis(1000));
  }
  if (hint.tokens_remaining) {
    server_.tokens_remaining = hint.tokens_remaining;
    tokens_reset_at_ = now + hint.tokens_reset.value_or(Millis(1000));
  }
}

void RateLimiter::HoldUntil(SteadyTime until, SteadyTime now) {
  until = Capped(until, now);
  std::lock_guard<std::mutex> lock(mu_);
  if (!hold_until_ || until > *hold_until_) hold_until_ = until;
}

// --- RetryBudget ------------------------------------------------------------

void RetryBudget::Prune(SteadyTime now) {
  const SteadyTime since = now - kWindow;
  while (!starts_.empty() && starts_.front() < since) starts_.pop_front();
  while (!grants_.empty() && grants_.front() < since) grants_.pop_front();
}

int64_t RetryBudget::Calls(SteadyTime now) const {
  // Started in the window, and started before it but still running.
  const auto older = in_flight_.lower_bound(now - kWindow);
  return static_cast<int64_t>(starts_.size()) +
         static_cast<int64_t>(std::distance(in_flight_.begin(), older));
}

void RetryBudget::CallStarted(SteadyTime now) {
  std::lock_guard<std::mutex> lock(mu_);
  Prune(now);
  starts_.push_back(now);
  in_flight_.insert(now);
}

bool RetryBudget::TryRetry(const RetryBudgetSpec& spec, SteadyTime now) {
  std::lock_guard<std::mutex> lock(mu_);
  Prune(now);
  // A small epsilon: 0.2 * 100 is 20, not 20.000000000000004 floored.
  const double share =
      std::floor(spec.ratio * static_cast<double>(Calls(now)) + 1e-9);
  const int64_t allowed =
      std::max<int64_t>(spec.min_retries, static_cast<int64_t>(share));
  if (static_cast<int64_t>(grants_.size()) >= allowed) return false;
  grants_.push_back(now);
  return true;
}

void RetryBudget::CallEnded(SteadyTime started) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = in_flight_.find(started); it != in_flight_.end()) {
    in_flight_.erase(it);
  }
}

std::pair<int64_t, int64_t> RetryBudget::Load(SteadyTime now) {
  std::lock_guard<std::mutex> lock(mu_);
  Prune(now);
  return {Calls(now), static_cast<int64_t>(grants_.size())};
}

// --- Circuit ----------------------------------------------------------------

CircuitVerdict ClassifyForCircuit(const ChatResult& result) {
  if (result.ok()) return CircuitVerdict::kOk;
  const ProviderError& e = result.error();
  switch (e.kind) {
    case ProviderErrorKind::kConnection:
    case ProviderErrorKind::kTimeout:
    case ProviderErrorKind::kMalformed:
    case ProviderErrorKind::kStreamIdle:
    case ProviderErrorKind::kStreamError:
      return CircuitVerdict::kOutage;
    case ProviderErrorKind::kHttpStatus:
      return e.http_status >= 500 || e.http_status == 408
                 ? CircuitVerdict::kOutage
                 : CircuitVerdict::kOk;
    case ProviderErrorKind::kTooLarge:
      return CircuitVerdict::kOk;
    case ProviderErrorKind::kNoDescriptors:
    case ProviderErrorKind::kDeadline:
    case ProviderErrorKind::kCancelled:
    case ProviderErrorKind::kConfig:
    case ProviderErrorKind::kRateLimited:
    case ProviderErrorKind::kCircuitOpen:
      return CircuitVerdict::kNeutral;
  }
  return CircuitVerdict::kNeutral;
}

bool Circuit::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

Admission Circuit::Admit(const CallContext& context, bool* probe) {
  Clock& clock = *context.clock;
  const Deadline& deadline = context.deadline;
  *probe = false;
  return WaitTurns(mu_, wake_, context, [&](SteadyTime now, Admission& out) {
    if (!open_ || (!probe_out_ && now >= next_probe_)) {
      if (open_) {
        probe_out_ = true;
        *probe = true;
      }
      return Turn::Done();
    }
    out.why = "circuit";
    if (!probe_out_ && deadline.is_set() && next_probe_ >= deadline.at()) {
      // No probe can go before the deadline: fail now, so a fallback
      // source still has the time that is left.
      out.error = GuardError(
          ProviderErrorKind::kCircuitOpen,
          "the circuit to " + host_ + " is open after " +
              std::to_string(failures_) +
              " failed requests in a row: the next probe is in " +
              FormatDuration(
                  std::chrono::duration_cast<Millis>(next_probe_ - now)) +
              " but the deadline is " +
              FormatDuration(*deadline.Remaining(clock)) + " away");
      return Turn::Done();
    }
    if (deadline.Expired(clock)) {
      out.error =
          GuardError(ProviderErrorKind::kDeadline,
                     "context deadline exceeded (the circuit to " + host_ +
                         " is open after " + std::to_string(failures_) +
                         " failed requests in a row)");
      return Turn::Done();
    }
    SteadyTime until = probe_out_ ? now + kLongSleep : next_probe_;
    if (deadline.is_set()) until = std::min(until, deadline.at());
    return Turn::SleepUntil(until);
  });
}

void Circuit::Record(const CircuitSpec& spec, CircuitVerdict verdict,
                     bool probe, const CallContext& context) {
  std::vector<CancelToken> sleepers;
  bool opened = false, closed = false;
  int64_t failures = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const SteadyTime now = context.clock->Now();
    if (probe) probe_out_ = false;
    if (verdict == CircuitVerdict::kOk) {
      failures_ = 0;
      closed = open_;
      open_ = false;
    } else if (verdict == CircuitVerdict::kOutage) {
      ++failures_;
      if (open_ && probe) {
        next_probe_ = now + spec.probe_after;
      } else if (!open_ && failures_ >= spec.failures) {
        open_ = opened = true;
        next_probe_ = now + spec.probe_after;
      }
    }
    failures = failures_;
    if (probe || closed || opened) sleepers = wake_.TakeAll();
  }
  WakeAll(std::move(sleepers));
  if (opened) {
    Log(context, LogLevel::kWarn, "provider.circuit_open",
        {{"host", host_},
         {"failures", failures},
         {"probe_after", FormatDuration(spec.probe_after)}});
  }
  if (closed) {
    Log(context, LogLevel::kInfo, "provider.circuit_closed", {{"host", host_}});
  }
}

// --- HostGuards -------------------------------------------------------------

std::string HostOf(const std::string& base_url) {
  std::string_view s = base_url;
  if (size_t scheme = s.find("://"); scheme != std::string_view::npos) {
    s.remove_prefix(scheme + 3);
  }
  s = s.substr(0, s.find('/'));
  if (size_t at = s.rfind('@'); at != std::string_view::npos) {
    s.remove_prefix(at + 1);
  }
  return std::string(s.empty() ? std::string_view(base_url) : s);
}

RateLimiter* HostGuards::Limiter(const std::string& key,
                                 const RateLimitSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = limiters_.try_emplace(key);
  if (added) {
    it->second = std::make_unique<RateLimiter>(spec);
  } else {
    it->second->Tighten(spec);
  }
  return it->second.get();
}

HostHealth* HostGuards::Health(const std::string& base_url) {
  const std::string host = HostOf(base_url);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = hosts_.try_emplace(host);
  if (added) it->second = std::make_unique<HostHealth>(host);
  return it->second.get();
}

// --- GuardedProvider --------------------------------------------------------

int64_t EstimateTokens(const ChatRequest& request) {
  size_t bytes = 0;
  for (const Message& m : request.messages) {
    bytes += m.content.size();
    for (const ToolCall& c : m.tool_calls) {
      bytes += c.name.size() + c.arguments.size();
    }
  }
  int64_t out =
      request.params.max_output_tokens.value_or(request.max_tokens.value_or(0));
  return static_cast<int64_t>(bytes / 4) + out;
}

GuardedProvider::GuardedProvider(Provider& inner, Guards guards)
    : inner_(inner), guards_(std::move(guards)) {}

void GuardedProvider::LogWait(const CallContext& context, Millis waited,
                              const std::string& why) const {
  if (waited.count() <= 0) return;
  Log(context, LogLevel::kInfo, "provider.rate_wait",
      {{"agent", context.agent},
       {"host", guards_.host},
       {"waited", FormatDuration(waited)},
       {"limit", why}});
}

namespace {

void Stamp(ChatResult& result, Millis waited) {
  if (result.ok()) {
    result.answer().waited += waited;
  } else {
    result.error().waited += waited;
  }
}

}  // namespace

ChatResult GuardedProvider::Send(const ChatRequest& request,
                                 const CallContext& context) {
  Millis waited{0};
  std::string why;
  bool probe = false;
  if (guards_.circuit) {
    Admission a = guards_.circuit->Admit(context, &probe);
    waited += a.waited;
    if (!a.why.empty()) why = a.why;
    if (a.error) {
      a.error->waited = waited;
      LogWait(context, waited, why);
      return *a.error;
    }
  }
  const int64_t tokens = guards_.limiter ? EstimateTokens(request) : 0;
  if (guards_.limiter) {
    Admission a = guards_.limiter->Acquire(tokens, context);
    waited += a.waited;
    if (!a.why.empty() && a.waited.count() > 0) why = a.why;
    if (a.error) {
      if (probe) {
        guards_.circuit->Record(guards_.circuit_spec, CircuitVerdict::kNeutral,
                                true, context);
      }
      a.error->waited = waited;
      LogWait(context, waited, why);
      return *a.error;
    }
  }
  LogWait(context, waited, why);
  CallContext inner_context = context;
  if (RateLimiter* limiter = guards_.limiter) {
    Clock* clock = context.clock;
    inner_context.on_response_headers = [limiter,
                                         clock](const HttpHeaders& headers) {
      limiter->Observe(ParseRateLimitHeaders(headers, clock->WallNow()),
                       clock->Now());
    };
  }
  ChatResult result = inner_.Send(request, inner_context);
  if (RateLimiter* limiter = guards_.limiter) {
    std::optional<int64_t> used;
    if (result.ok()) used = result.answer().usage.total_tokens();
    const SteadyTime now = context.clock->Now();
    limiter->Release(tokens, used, now);
    if (!result.ok() && result.error().http_status == 429 &&
        result.error().retry_after) {
      limiter->HoldUntil(now + std::min(*result.error().retry_after, kMaxWait),
                         now);
    }
  }
  if (guards_.circuit) {
    guards_.circuit->Record(guards_.circuit_spec, ClassifyForCircuit(result),
                            probe, context);
  }
  Stamp(result, waited);
  return result;
}

}  // namespace steps
