// The trace of a run (docs/observability.md), when the OTEL_* variables
// name a collector: the exporter installed for the run's length, the
// observer that makes the pipeline's spans, and the run's span context
// (a child of TRACEPARENT's, when the environment has one).
#ifndef STEPS_CLI_RUN_TRACING_H_
#define STEPS_CLI_RUN_TRACING_H_

#include <memory>
#include <optional>
#include <string>

#include "core/cancel.h"
#include "core/duration.h"
#include "core/trace.h"
#include "pipeline/observer.h"

namespace steps::telemetry {
class OtlpExporter;
class RunSpans;
}  // namespace steps::telemetry

namespace steps::cli {

class RunTracing {
 public:
  // Reads the environment; what is wrong in it is logged
  // (WRN telemetry.config), and a run without a collector has no trace.
  explicit RunTracing(const std::string& run_id);
  ~RunTracing();
  RunTracing(const RunTracing&) = delete;
  RunTracing& operator=(const RunTracing&) = delete;

  // Null when no trace is exported.
  pipeline::RunObserver* observer();
  // Invalid when no trace is exported. Not sampled when TRACEPARENT's
  // parent is not: then nothing is exported (the parent's sampling is
  // followed), and tasks still get TRACEPARENT, flagged 00.
  trace::SpanContext run_context() const { return run_; }
  // Whether the run started a trace of its own (no TRACEPARENT, or one
  // that is not W3C): then an inherited TRACESTATE belongs to no trace of
  // this run and is withheld from its tasks.
  bool started_own_trace() const { return own_trace_; }
  // Gives the collector what is left: at most 2.5% of the run's duration
  // or 20 ms, whichever is longer (STEPS_TRACE_END_GRACE sets it; never
  // past the export timeout), so a slow or dead collector costs a run next
  // to nothing. Again: a no-op.
  // A cancelled `abort` (a signal) ends the wait at once.
  void Finish(Millis run_duration, const CancelToken& abort = CancelToken());

 private:
  std::shared_ptr<telemetry::OtlpExporter> exporter_;
  std::unique_ptr<telemetry::RunSpans> spans_;
  std::shared_ptr<trace::SpanExporter> previous_;
  trace::SpanContext run_;
  bool own_trace_ = false;
  std::optional<Millis> end_grace_;  // STEPS_TRACE_END_GRACE.
};

// The grace Finish gives by default: max(20 ms, 2.5% of `run_duration`).
Millis TraceFlushGrace(Millis run_duration);

}  // namespace steps::cli

#endif  // STEPS_CLI_RUN_TRACING_H_
