#include "cli/run_tracing.h"

#include <algorithm>
#include <cstdlib>

#include "core/duration.h"
#include "core/log.h"
#include "telemetry/otlp_exporter.h"
#include "telemetry/run_spans.h"

namespace steps::cli {

Millis TraceFlushGrace(Millis run_duration) {
  return std::max(Millis(20), Millis(run_duration.count() / 40));
}

RunTracing::RunTracing(const std::string& run_id) {
  telemetry::OtlpSetup setup = telemetry::OtlpConfigFromEnvironment(
      [](const char* name) { return std::getenv(name); }, STEPS_VERSION);
  for (const std::string& problem : setup.problems)
    LogEvent(LogLevel::kWarn, "telemetry.config", {{"problem", problem}});
  if (!setup.config) return;
  trace::SpanId parent{};
  run_.trace_id = trace::NewTraceId();
  if (const char* tp = std::getenv("TRACEPARENT"); tp != nullptr && *tp) {
    if (std::optional<trace::SpanContext> c = trace::ParseTraceparent(tp)) {
      run_.trace_id = c->trace_id;
      run_.sampled = c->sampled;
      parent = c->span_id;
    } else {
      LogEvent(LogLevel::kWarn, "telemetry.config",
               {{"problem", "TRACEPARENT=" + std::string(tp) +
                                " is not a W3C traceparent; the run starts "
                                "a trace of its own"}});
    }
  }
  if (const char* g = std::getenv("STEPS_TRACE_END_GRACE"); g && *g) {
    Result<Millis> grace = std::string_view(g) == "0"
                               ? Result<Millis>(Millis(0))
                               : ParseDuration(g);
    if (grace.ok() && grace->count() >= 0) {
      end_grace_ = *grace;
    } else {
      LogEvent(LogLevel::kWarn, "telemetry.config",
               {{"problem", "STEPS_TRACE_END_GRACE=" + std::string(g) +
                                " is not a duration (500ms, 2s); the default "
                                "holds"}});
    }
  }
  run_.span_id = trace::NewSpanId();
  exporter_ = std::make_shared<telemetry::OtlpExporter>(*setup.config);
  spans_ = std::make_unique<telemetry::RunSpans>(run_, parent, run_id);
  previous_ = trace::SetSpanExporter(exporter_);
  trace::SetCaptureContent(setup.config->capture_content);
}

RunTracing::~RunTracing() { Finish(Millis(0)); }

pipeline::RunObserver* RunTracing::observer() { return spans_.get(); }

void RunTracing::Finish(Millis run_duration, const CancelToken& abort) {
  if (!exporter_) return;
  trace::SetSpanExporter(previous_);
  trace::SetCaptureContent(false);
  exporter_->Shutdown(end_grace_ ? *end_grace_ : TraceFlushGrace(run_duration),
                      abort);
  // Spans lost without a failed export (a full queue) are said too.
  if (auto stats = exporter_->stats();
      stats.dropped > 0 && stats.batches_failed == 0) {
    LogEvent(LogLevel::kWarn, "telemetry.spans_dropped",
             {{"spans", stats.dropped},
              {"exported", stats.exported},
              {"why",
               "more spans ended at once than the queue holds "
               "(OTEL_BSP_MAX_QUEUE_SIZE)"}});
  }
  exporter_.reset();
}

}  // namespace steps::cli
