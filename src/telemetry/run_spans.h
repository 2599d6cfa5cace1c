// The spans of a run's pipeline, made from its records as each ends: the
// run, its jobs, their steps (hooks and fixers among them), each attempt,
// and the wait between two attempts. Ids come from pipeline/spans.h, so an
// agent conversation started under an attempt (and a task's own spans,
// through TRACEPARENT) hang under the attempt's span. Log lines about a
// step (a request retried, a fallback, a nudge) become events of the
// attempt they happened in. docs/observability.md lists the names and
// attributes.
#ifndef STEPS_TELEMETRY_RUN_SPANS_H_
#define STEPS_TELEMETRY_RUN_SPANS_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/trace.h"
#include "pipeline/observer.h"

namespace steps::telemetry {

class RunSpans : public pipeline::RunObserver {
 public:
  // `run`: the run span's context (its trace, its id); `parent`: the span
  // the run is a child of (TRACEPARENT's), all zero for none.
  RunSpans(trace::SpanContext run, trace::SpanId parent, std::string run_id);

  void OnLog(const pipeline::StepRef& step, std::string_view line) override;
  void OnGateOpen(const pipeline::StepRef& step,
                  const pipeline::GateOpening& gate) override;
  void OnStepEnd(const pipeline::StepRecord& step) override;
  void OnJobEnd(const pipeline::JobRecord& job) override;
  void OnRunEnd(const pipeline::RunRecord& run) override;

 private:
  trace::SpanContext Context(const trace::SpanId& id) const;

  const trace::SpanContext run_;
  const trace::SpanId parent_;
  const std::string run_id_;
  std::mutex mu_;
  // Events logged about a step that has not ended, by step id.
  std::map<std::string, std::vector<trace::SpanEvent>> events_;
};

}  // namespace steps::telemetry

#endif  // STEPS_TELEMETRY_RUN_SPANS_H_
