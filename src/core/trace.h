// Spans of a trace (OpenTelemetry's model, docs/observability.md): what the
// engine records of a run when an exporter is installed (telemetry/otlp.h
// sends them to a collector). Without one, starting a span costs an atomic
// load and records nothing, so code paths open spans unconditionally.
//
// A span's identity is explicit: every span is started with its parent's
// context, which callers pass down (a run's context to its jobs, an
// attempt's to its agent conversation, a conversation's to its requests).
// Spans of the same thing that must be found from two places (the attempt
// span the pipeline's observer records and the one an agent's conversation
// is a child of) get an id derived from the trace and a key (DerivedSpanId).
#ifndef STEPS_CORE_TRACE_H_
#define STEPS_CORE_TRACE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/log.h"

namespace steps::trace {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct SpanContext {
  TraceId trace_id{};
  SpanId span_id{};
  bool sampled = true;

  // Both ids non-zero (W3C Trace Context: all-zero ids are invalid).
  bool valid() const;
  // "00-<32 hex>-<16 hex>-01" (or -00 when not sampled).
  std::string Traceparent() const;
};

// A `traceparent` value (W3C Trace Context, version 00; a later version is
// read by its first four fields). nullopt when it is not one.
std::optional<SpanContext> ParseTraceparent(std::string_view text);

// Random ids, never all zero.
TraceId NewTraceId();
SpanId NewSpanId();
// An id that depends on nothing but the trace and `key`, never all zero:
// two places that know both name the same span.
SpanId DerivedSpanId(const TraceId& trace, std::string_view key);

std::string Hex(const uint8_t* bytes, size_t n);

using AttributeValue =
    std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;

struct Attribute {
  std::string key;
  AttributeValue value;
};

struct SpanEvent {
  std::string name;
  int64_t time_ns = 0;  // Unix time.
  std::vector<Attribute> attributes;
};

// As OTLP numbers them.
enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };
enum class SpanStatus { kUnset = 0, kOk = 1, kError = 2 };

struct SpanData {
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  SpanContext context;
  SpanId parent_span_id{};  // All zero for a root.
  int64_t start_ns = 0;     // Unix time.
  int64_t end_ns = 0;
  std::vector<Attribute> attributes;
  std::vector<SpanEvent> events;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
};

// Where ended spans go. Export is called on the thread that ends the span
// and must not block (queue and return).
class SpanExporter {
 public:
  virtual ~SpanExporter() = default;
  virtual void Export(SpanData span) = 0;
};

// Installs the process's exporter (nullptr: none; spans record nothing).
// Returns the previous one. Thread-safe.
std::shared_ptr<SpanExporter> SetSpanExporter(
    std::shared_ptr<SpanExporter> exporter);
bool Enabled();

// Whether spans carry message contents, tool arguments and results
// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT; off by default).
// Masked like everything else an exporter sends.
void SetCaptureContent(bool on);
bool CaptureContent();

// A log event's fields as span attributes, typed as LogField says.
std::vector<Attribute> LogAttributes(const std::vector<LogField>& fields);

// Unix time now, in nanoseconds, as RealClock().WallNow() reads it.
int64_t NowNs();

// A span being recorded. Movable; ends itself when destroyed. A default
// span, or one started while no exporter is installed, records nothing and
// its context is invalid.
class Span {
 public:
  Span() = default;
  // Starts a span under `parent`: a child of its span in its trace; a root
  // of its trace when only the trace id is set; a root of a new trace when
  // neither is. `id`: its span id, when it must be a known one
  // (DerivedSpanId). `start_ns`: when it began (Unix ns), if not now.
  static Span Start(std::string name, const SpanContext& parent,
                    SpanKind kind = SpanKind::kInternal,
                    std::optional<SpanId> id = std::nullopt,
                    std::optional<int64_t> start_ns = std::nullopt);
  Span(Span&& other) noexcept = default;
  Span& operator=(Span&& other) noexcept;
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span() { End(); }

  bool recording() const { return data_ != nullptr; }
  SpanContext context() const;

  Span& Set(std::string key, AttributeValue value);
  // Overloads that keep a literal from picking bool and take any integer.
  Span& Set(std::string key, const char* value) {
    return Set(std::move(key), AttributeValue(std::string(value)));
  }
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                             int> = 0>
  Span& Set(std::string key, T value) {
    return Set(std::move(key), AttributeValue(static_cast<int64_t>(value)));
  }
  void AddEvent(std::string name, std::vector<Attribute> attributes = {});
  void AddEventAt(int64_t time_ns, std::string name,
                  std::vector<Attribute> attributes = {});
  // Status error with `message`; a later call replaces it.
  void SetError(std::string message);
  void SetOk();
  // Ends it now (or at `end_ns`) and hands it to the exporter; again is a
  // no-op.
  void End(std::optional<int64_t> end_ns = std::nullopt);

 private:
  std::unique_ptr<SpanData> data_;
  std::shared_ptr<SpanExporter> exporter_;
};

}  // namespace steps::trace

#endif  // STEPS_CORE_TRACE_H_
