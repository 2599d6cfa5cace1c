#include "providers/retry.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "core/json_text.h"
#include "core/log.h"
#include "core/random.h"
#include "core/trace.h"
#include "core/utf8.h"
#include "providers/exchange.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

void Log(const CallContext& context, LogLevel level, std::string_view event,
         std::vector<LogField> fields) {
  if (context.on_log) context.on_log(FormatLogEvent(level, event, fields));
  LogEvent(level, event, fields);
}

ChatResult GiveUp(ProviderError error, int sent, const CallContext& context) {
  error.requests = sent;
  if (context.log_give_up && error.kind != ProviderErrorKind::kCancelled) {
    Log(context, LogLevel::kWarn, "agent.conversation_failed",
        {{"agent", context.agent},
         {"provider_requests", context.prior_requests + sent},
         {"error", error.message}});
  }
  return error;
}

// The one guard at the provider boundary: an adapter that throws (a
// third-party one reading a field that is not there, say) costs one
// malformed answer, retried like any other, never the process.
ChatResult SendGuarded(Provider& inner, const ChatRequest& request,
                       const CallContext& context) {
  std::string what;
  try {
    ChatResult result = inner.Send(request, context);
    if (result.ok()) {
      if (auto bad = CheckAnswerLimits(result.answer())) return *bad;
    }
    return result;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  return MalformedAnswer("the provider adapter failed: " + what);
}

// `text` cut to at most `max` bytes on a UTF-8 boundary, "..." after.
// One message in the GenAI conventions' shape: {role, parts: [...]}.
nlohmann::json MessageParts(const Message& m) {
  nlohmann::json parts = nlohmann::json::array();
  if (m.role == Role::kTool) {
    parts.push_back({{"type", "tool_call_response"},
                     {"id", m.tool_call_id},
                     {"response", m.content}});
  } else if (!m.content.empty()) {
    parts.push_back({{"type", "text"}, {"content", m.content}});
  }
  for (const ToolCall& c : m.tool_calls) {
    parts.push_back({{"type", "tool_call"},
                     {"id", c.id},
                     {"name", c.name},
                     {"arguments", c.arguments}});
  }
  return {{"role", RoleName(m.role)}, {"parts", std::move(parts)}};
}

std::string MessagesJson(const ChatRequest& request) {
  nlohmann::json all = nlohmann::json::array();
  for (const Message& m : request.messages) all.push_back(MessageParts(m));
  return DumpJson(all);
}

std::string AnswerJson(const ChatAnswer& a) {
  nlohmann::json m = MessageParts(Message::Assistant(a.text, a.tool_calls));
  m["finish_reason"] = a.finish_reason;
  return DumpJson(nlohmann::json::array({std::move(m)}));
}

// The span of one request (gen_ai "chat"), under the conversation's.
trace::Span StartRequestSpan(const ChatRequest& request,
                             const CallContext& context, int attempt) {
  trace::Span span = trace::Span::Start(
      "chat " + request.model, context.trace_parent, trace::SpanKind::kClient);
  if (!span.recording()) return span;
  span.Set("gen_ai.operation.name", "chat")
      .Set("gen_ai.provider.name", context.provider_name)
      .Set("gen_ai.request.model", request.model)
      .Set("steps.request.attempt", attempt);
  if (trace::CaptureContent()) {
    span.Set("gen_ai.input.messages", CutText(MessagesJson(request), 65536));
  }
  return span;
}

void EndRequestSpan(trace::Span& span, const ChatResult& result) {
  if (!span.recording()) return;
  if (result.ok()) {
    const ChatAnswer& a = result.answer();
    span.Set("gen_ai.response.model", a.model)
        .Set("gen_ai.response.id", a.id)
        .Set("gen_ai.usage.input_tokens", a.usage.prompt_tokens)
        .Set("gen_ai.usage.output_tokens", a.usage.completion_tokens)
        .Set("gen_ai.response.finish_reasons",
             std::vector<std::string>{a.finish_reason});
    if (a.usage.cost_usd) span.Set("steps.cost_usd", *a.usage.cost_usd);
    if (trace::CaptureContent()) {
      span.Set("gen_ai.output.messages", CutText(AnswerJson(a), 65536));
    }
  } else {
    const ProviderError& e = result.error();
    span.Set("error.type", e.StatusLabel());
    if (e.kind == ProviderErrorKind::kHttpStatus)
      span.Set("http.response.status_code", e.http_status);
    span.SetError(e.message);
  }
  span.End();
}

}  // namespace

Millis BackoffDelay(const RetryPolicy& policy, int retry, double u) {
  double d = static_cast<double>(policy.initial_backoff.count()) *
             std::pow(policy.multiplier, std::max(0, retry - 1));
  d = std::min(d, static_cast<double>(policy.max_backoff.count()));
  u = std::clamp(u, 0.0, 1.0);
  return Millis(static_cast<int64_t>(std::llround(d / 2 + u * d / 2)));
}

RetryingProvider::RetryingProvider(Provider& inner, RetryPolicy policy)
    : inner_(inner), policy_(std::move(policy)) {
  if (policy_.attempts < 1) policy_.attempts = 1;
}

std::optional<std::string> RetryingProvider::WhyNotRetry(
    Millis wait, bool server_asked, const CallContext& context) const {
  std::optional<Millis> left = context.deadline.Remaining(*context.clock);
  if (left && wait >= *left) {
    return "; not retried: " +
           std::string(server_asked ? "the server asked to wait "
                                    : "the backoff is ") +
           FormatDuration(wait) + " but the deadline is " +
           FormatDuration(*left) + " away";
  }
  if (!left && server_asked && wait > policy_.max_server_wait) {
    return "; not retried: the server asked to wait " + FormatDuration(wait) +
           ", longer than " + FormatDuration(policy_.max_server_wait);
  }
  return std::nullopt;
}

bool RetryingProvider::BudgetAllows(const ChatRequest& request,
                                    const CallContext& context, int attempt,
                                    ProviderError& error) const {
  const SteadyTime now = context.clock->Now();
  if (!policy_.budget || policy_.budget->TryRetry(policy_.budget_spec, now)) {
    return true;
  }
  auto [calls, retries] = policy_.budget->Load(now);
  Log(context, LogLevel::kWarn, "agent.retry_denied",
      {{"agent", context.agent},
       {"model", request.model},
       {"attempt", attempt},
       {"host", policy_.host},
       {"retries", retries},
       {"calls", calls}});
  error.retry_denied = true;
  error.message += "; not retried: the retry budget of " + policy_.host +
                   " is spent (" + std::to_string(retries) + " retries for " +
                   std::to_string(calls) + " calls in the last 10s)";
  return false;
}

ChatResult RetryingProvider::Send(const ChatRequest& request,
                                  const CallContext& context) {
  const int attempts = policy_.attempts;
  int sent = 0;
  Millis waited{0};
  const SteadyTime started = context.clock->Now();
  if (policy_.budget) policy_.budget->CallStarted(started);
  auto done = [&](ChatResult result) {
    if (policy_.budget) policy_.budget->CallEnded(started);
    if (result.ok()) {
      result.answer().waited = waited;
    } else {
      result.error().waited = waited;
    }
    return result;
  };
  for (int attempt = 1;; ++attempt) {
    trace::Span span = StartRequestSpan(request, context, attempt);
    ChatResult result = SendGuarded(inner_, request, context);
    EndRequestSpan(span, result);
    if (result.ok()) {
      result.answer().requests = sent + 1;
      waited += result.answer().waited;
      return done(std::move(result));
    }
    ProviderError error = std::move(result.error());
    sent += error.requests;
    waited += error.waited;
    if (!error.retryable())
      return done(GiveUp(std::move(error), sent, context));
    if (attempt >= attempts) {
      error.message = "gave up after " + std::to_string(sent) +
                      (sent == 1 ? " request: " : " requests: ") +
                      error.message;
      return done(GiveUp(std::move(error), sent, context));
    }

    Millis wait;
    bool server_asked = error.retry_after.has_value();
    if (server_asked) {
      wait = *error.retry_after;
    } else {
      double u = policy_.jitter ? policy_.jitter() : RandomUnit();
      wait = BackoffDelay(policy_, attempt, u);
    }
    if (auto why = WhyNotRetry(wait, server_asked, context)) {
      error.message += *why;
      return done(GiveUp(std::move(error), sent, context));
    }
    if (!BudgetAllows(request, context, attempt, error)) {
      return done(GiveUp(std::move(error), sent, context));
    }

    Log(context, LogLevel::kWarn, "agent.request_retry",
        {{"agent", context.agent},
         {"model", request.model},
         {"attempt", attempt},
         {"attempts", attempts},
         error.kind == ProviderErrorKind::kHttpStatus
             ? LogField("status", error.http_status)
             : LogField("status", error.StatusLabel())});
    trace::Span waiting =
        trace::Span::Start("retry wait", context.trace_parent);
    waiting.Set("steps.wait_ms", wait.count())
        .Set("steps.server_asked", server_asked)
        .Set("error.type", error.StatusLabel());
    const bool waited_out = context.clock->SleepFor(wait, context.cancel);
    waiting.End();
    if (!waited_out) {
      ProviderError cancelled = MakeProviderError(
          ProviderErrorKind::kCancelled, "cancelled while waiting to retry");
      return done(GiveUp(std::move(cancelled), sent, context));
    }
  }
}

}  // namespace steps
