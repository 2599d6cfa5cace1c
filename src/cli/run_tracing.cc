#include "cli/run_tracing.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "core/duration.h"
#include "core/log.h"
#include "telemetry/otlp_exporter.h"
#include "telemetry/run_spans.h"

namespace steps::cli {

namespace {

// The collectors that failed an export in this process: a later run's
// failures there are not said again.
std::mutex failed_mu;
std::set<std::string>& FailedEndpoints() {
  static auto* endpoints = new std::set<std::string>();  // Never destroyed.
  return *endpoints;
}

bool FailedBefore(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(failed_mu);
  return FailedEndpoints().count(endpoint) > 0;
}

}  // namespace

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
  own_trace_ = true;
  if (const char* tp = std::getenv("TRACEPARENT"); tp != nullptr && *tp) {
    if (std::optional<trace::SpanContext> c = trace::ParseTraceparent(tp)) {
      run_.trace_id = c->trace_id;
      run_.sampled = c->sampled;
      parent = c->span_id;
      own_trace_ = false;
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
  // A parent not sampled: none of its trace is recorded, this run's
  // neither (as OpenTelemetry's parent-based sampler does).
  if (!run_.sampled) return;
  setup.config->say_failures = !FailedBefore(setup.config->endpoint);
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
  const auto stats = exporter_->stats();
  if (stats.batches_failed > 0) {
    std::lock_guard<std::mutex> lock(failed_mu);
    FailedEndpoints().insert(exporter_->config().endpoint);
  }
  // Spans lost without a failed export (a full queue) are said too.
  if (stats.dropped > 0 && stats.batches_failed == 0) {
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
