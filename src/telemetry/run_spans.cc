#include "telemetry/run_spans.h"

#include <algorithm>
#include <chrono>

#include "core/outcome.h"
#include "pipeline/model.h"
#include "pipeline/spans.h"

namespace steps::telemetry {
namespace {

int64_t Ns(WallTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

int64_t EndNs(WallTime started, Millis duration) {
  return Ns(started) +
         std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
}

// How a gate ended, as the log line gate.ended says it: when it was
// decided (else at the step's end), how, by whom and through what.
trace::SpanEvent GateEnded(const pipeline::GateVerdict& v, int64_t end_ns) {
  using How = pipeline::GateVerdict::How;
  std::vector<trace::Attribute> attributes = {
      {"steps.gate.how",
       std::string(v.how == How::kDecided
                       ? pipeline::GateDecisionName(v.decision)
                   : v.how == How::kExpired ? "expired"
                   : v.how == How::kCut     ? "cut"
                                            : "aborted")}};
  if (!v.by.empty()) attributes.push_back({"steps.gate.by", v.by});
  if (!v.via.empty()) attributes.push_back({"steps.gate.via", v.via});
  const int64_t at = v.at == WallTime{} ? end_ns : std::min(Ns(v.at), end_ns);
  return {"gate.ended", at, std::move(attributes)};
}

// Failed, errored or aborted: the span's status says so with the error.
void SetOutcome(trace::Span& span, Outcome outcome, const std::string& error) {
  span.Set("steps.outcome", std::string(OutcomeName(outcome)));
  if (outcome == Outcome::kSucceeded || outcome == Outcome::kNotStarted) return;
  span.Set("error.type", std::string(OutcomeName(outcome)));
  span.SetError(error.empty() ? std::string(OutcomeName(outcome)) : error);
}

std::string StepSpanName(const pipeline::StepRef& ref) {
  if (ref.hook)
    return std::string(pipeline::HookKindName(*ref.hook)) + " " + ref.name;
  if (ref.fixer) return "fix " + ref.name;
  return std::string(pipeline::StepKindName(ref.kind)) + " " + ref.name;
}

// "WRN agent.request_retry agent=a ..." -> "agent.request_retry".
std::string EventName(std::string_view line) {
  size_t a = line.find(' ');
  if (a == std::string_view::npos) return std::string(line);
  size_t b = line.find(' ', a + 1);
  return std::string(line.substr(
      a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1));
}

}  // namespace

RunSpans::RunSpans(trace::SpanContext run, trace::SpanId parent,
                   std::string run_id)
    : run_(run), parent_(parent), run_id_(std::move(run_id)) {}

trace::SpanContext RunSpans::Context(const trace::SpanId& id) const {
  trace::SpanContext c = run_;
  c.span_id = id;
  return c;
}

void RunSpans::OnLog(const pipeline::StepRef& step, std::string_view line) {
  std::lock_guard<std::mutex> lock(mu_);
  events_[step.id].push_back(
      {EventName(line),
       trace::NowNs(),
       {{"log.severity", std::string(line.substr(0, line.find(' ')))},
        {"log.line", std::string(line)}}});
}

void RunSpans::OnGateOpen(const pipeline::StepRef& step,
                          const pipeline::GateOpening& gate) {
  std::vector<trace::Attribute> attributes = {
      {"steps.gate.message", gate.message}};
  if (gate.deadline)
    attributes.push_back({"steps.gate.deadline_ns", Ns(*gate.deadline)});
  std::lock_guard<std::mutex> lock(mu_);
  events_[step.id].push_back(
      {"gate.waiting", trace::NowNs(), std::move(attributes)});
}

void RunSpans::OnStepEnd(const pipeline::StepRecord& step) {
  if (!trace::Enabled()) return;
  std::vector<trace::SpanEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = events_.find(step.ref.id);
    if (it != events_.end()) {
      events = std::move(it->second);
      events_.erase(it);
    }
  }
  if (step.gate)
    events.push_back(GateEnded(*step.gate, EndNs(step.started, step.duration)));
  const trace::TraceId& t = run_.trace_id;
  const trace::SpanId step_id = pipeline::StepSpanId(t, run_id_, step.ref.id);
  trace::Span span =
      trace::Span::Start(StepSpanName(step.ref),
                         Context(pipeline::JobSpanId(t, run_id_, step.ref.job)),
                         trace::SpanKind::kInternal, step_id, Ns(step.started));
  span.Set("steps.step.id", step.ref.id)
      .Set("steps.step.name", step.ref.name)
      .Set("steps.step.kind", pipeline::StepKindName(step.ref.kind))
      .Set("steps.job", step.ref.job)
      .Set("steps.step.line", step.ref.line)
      .Set("steps.attempts", step.cached ? size_t{0} : step.attempts.size());
  if (step.ref.hook)
    span.Set("steps.hook", pipeline::HookKindName(*step.ref.hook));
  if (!step.ref.cell.empty()) span.Set("steps.cell", step.ref.cell);
  if (step.cached) {
    span.Set("steps.cached", true);
    span.Set("steps.cached_from_run", step.cached_from_run);
  }
  SetOutcome(span, step.outcome, step.error);

  const pipeline::AttemptRecord* previous = nullptr;
  // A step from the cache ran nothing here: its record's attempts are the
  // run's it came from.
  static const std::vector<pipeline::AttemptRecord> kNone;
  for (const pipeline::AttemptRecord& a : step.cached ? kNone : step.attempts) {
    const int64_t start = Ns(a.started);
    const int64_t end = EndNs(a.started, a.duration);
    if (previous != nullptr) {
      const int64_t waited_from = EndNs(previous->started, previous->duration);
      trace::Span wait = trace::Span::Start("retry wait", span.context(),
                                            trace::SpanKind::kInternal,
                                            std::nullopt, waited_from);
      wait.Set("steps.attempt", a.number);
      wait.End(std::max(waited_from, start));
    }
    trace::Span attempt = trace::Span::Start(
        "attempt " + std::to_string(a.number), span.context(),
        trace::SpanKind::kInternal,
        pipeline::AttemptSpanId(t, run_id_, step.ref.id, a.number), start);
    attempt.Set("steps.attempt", a.number).Set("steps.attempts", a.of);
    if (a.exit_code) attempt.Set("process.exit.code", *a.exit_code);
    if (a.timed_out) attempt.Set("steps.timed_out", true);
    if (a.clipped_to) attempt.Set("steps.clipped_to_ms", a.clipped_to->count());
    if (!a.exhausted_by.empty())
      attempt.Set("steps.exhausted_by", a.exhausted_by);
    for (auto it = events.begin(); it != events.end();) {
      // Durations are whole milliseconds: an event of the attempt's last
      // millisecond is still the attempt's.
      if (it->time_ns >= start && it->time_ns < end + 1000000) {
        attempt.AddEventAt(it->time_ns, it->name, std::move(it->attributes));
        it = events.erase(it);
      } else {
        ++it;
      }
    }
    SetOutcome(attempt, a.outcome, a.error);
    if (a.timed_out) attempt.Set("error.type", "timeout");
    attempt.End(end);
    previous = &a;
  }
  for (trace::SpanEvent& e : events)  // Between attempts, or in none.
    span.AddEventAt(e.time_ns, e.name, std::move(e.attributes));
  span.End(EndNs(step.started, step.duration));
}

void RunSpans::OnJobEnd(const pipeline::JobRecord& job) {
  if (!trace::Enabled()) return;
  trace::Span span = trace::Span::Start(
      "job " + job.name, run_, trace::SpanKind::kInternal,
      pipeline::JobSpanId(run_.trace_id, run_id_, job.name), Ns(job.started));
  span.Set("steps.job", job.name);
  SetOutcome(span, job.outcome, job.error);
  span.End(EndNs(job.started, job.duration));
}

void RunSpans::OnRunEnd(const pipeline::RunRecord& run) {
  if (!trace::Enabled()) return;
  trace::Span span = trace::Span::Start("run " + run.file, Context(parent_),
                                        trace::SpanKind::kInternal,
                                        run_.span_id, Ns(run.started));
  span.Set("steps.run.id", run.id)
      .Set("steps.file", run.file)
      .Set("steps.taken_by", run.taken_by);
  SetOutcome(span, run.outcome, "");
  span.End(EndNs(run.started, run.duration));
}

}  // namespace steps::telemetry
