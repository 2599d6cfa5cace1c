// The ids of the spans a run's records make (telemetry/run_spans.h): derived
// from the trace, the run and the step, so that a task's TRACEPARENT and an
// agent conversation's spans name their attempt's span without asking the
// observer that records it.
#ifndef STEPS_PIPELINE_SPANS_H_
#define STEPS_PIPELINE_SPANS_H_

#include <string>

#include "core/trace.h"

namespace steps::pipeline {

inline trace::SpanId JobSpanId(const trace::TraceId& trace,
                               const std::string& run_id,
                               const std::string& job) {
  return trace::DerivedSpanId(trace, "job\n" + run_id + "\n" + job);
}

inline trace::SpanId StepSpanId(const trace::TraceId& trace,
                                const std::string& run_id,
                                const std::string& step_id) {
  return trace::DerivedSpanId(trace, "step\n" + run_id + "\n" + step_id);
}

inline trace::SpanId AttemptSpanId(const trace::TraceId& trace,
                                   const std::string& run_id,
                                   const std::string& step_id, int attempt) {
  return trace::DerivedSpanId(trace, "attempt\n" + run_id + "\n" + step_id +
                                         "\n" + std::to_string(attempt));
}

// The context of an attempt's span in the run's trace `run` (its trace id
// is what counts).
inline trace::SpanContext AttemptSpan(const trace::SpanContext& run,
                                      const std::string& run_id,
                                      const std::string& step_id, int attempt) {
  trace::SpanContext c = run;
  c.span_id = AttemptSpanId(run.trace_id, run_id, step_id, attempt);
  return c;
}

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_SPANS_H_
