#include "core/trace.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "core/clock.h"
#include "core/hash.h"
#include "core/random.h"

namespace steps::trace {
namespace {

std::mutex g_mu;
std::shared_ptr<SpanExporter> g_exporter;
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_capture{false};

std::shared_ptr<SpanExporter> CurrentExporter() {
  if (!g_enabled.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  return g_exporter;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& a) {
  for (uint8_t b : a)
    if (b != 0) return false;
  return true;
}

template <size_t N>
void FillRandom(std::array<uint8_t, N>& a) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t r = RandomU64();
      for (size_t j = 0; j < 8 && i + j < N; ++j)
        a[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
  } while (AllZero(a));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // W3C: lower case only.
}

template <size_t N>
bool ReadHex(std::string_view text, std::array<uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    int hi = HexDigit(text[2 * i]);
    int lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

bool SpanContext::valid() const {
  return !AllZero(trace_id) && !AllZero(span_id);
}

std::string SpanContext::Traceparent() const {
  return "00-" + Hex(trace_id.data(), trace_id.size()) + "-" +
         Hex(span_id.data(), span_id.size()) + (sampled ? "-01" : "-00");
}

std::optional<SpanContext> ParseTraceparent(std::string_view text) {
  // version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55.
  if (text.size() < 55) return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  SpanContext c;
  if (!ReadHex(text.substr(0, 2), version) || version[0] == 0xff ||
      text[2] != '-' || !ReadHex(text.substr(3, 32), c.trace_id) ||
      text[35] != '-' || !ReadHex(text.substr(36, 16), c.span_id) ||
      text[52] != '-' || !ReadHex(text.substr(53, 2), flags)) {
    return std::nullopt;
  }
  // Version 00 is exactly 55 characters; a later one may add "-...".
  if (version[0] == 0 ? text.size() != 55
                      : text.size() > 55 && text[55] != '-') {
    return std::nullopt;
  }
  if (!c.valid()) return std::nullopt;
  c.sampled = (flags[0] & 1) != 0;
  return c;
}

TraceId NewTraceId() {
  TraceId id;
  FillRandom(id);
  return id;
}

SpanId NewSpanId() {
  SpanId id;
  FillRandom(id);
  return id;
}

SpanId DerivedSpanId(const TraceId& trace, std::string_view key) {
  std::string material(reinterpret_cast<const char*>(trace.data()),
                       trace.size());
  material += key;
  uint64_t h = FastHash64(material);
  if (h == 0) h = 1;
  SpanId id;
  for (size_t i = 0; i < 8; ++i) id[i] = static_cast<uint8_t>(h >> (8 * i));
  return id;
}

std::string Hex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::shared_ptr<SpanExporter> SetSpanExporter(
    std::shared_ptr<SpanExporter> exporter) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_enabled = exporter != nullptr;
  std::swap(g_exporter, exporter);
  return exporter;
}

std::vector<Attribute> LogAttributes(const std::vector<LogField>& fields) {
  std::vector<Attribute> out;
  out.reserve(fields.size());
  for (const LogField& f : fields) {
    switch (f.kind) {
      case LogField::Kind::kInteger: {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(f.value.c_str(), &end, 10);
        if (errno == 0 && end != nullptr && *end == '\0') {
          out.push_back({f.key, static_cast<int64_t>(v)});
        } else {  // Past int64 (an unsigned count): as text.
          out.push_back({f.key, f.value});
        }
        break;
      }
      case LogField::Kind::kBool:
        out.push_back({f.key, f.value == "true"});
        break;
      case LogField::Kind::kText:
        out.push_back({f.key, f.value});
        break;
    }
  }
  return out;
}

void SetCaptureContent(bool on) { g_capture = on; }

bool CaptureContent() { return g_capture.load(std::memory_order_relaxed); }

bool Enabled() { return g_enabled.load(std::memory_order_relaxed); }

int64_t NowNs() {
  // The calendar time records use (RealClock: the steady clock plus an
  // offset), so a span lies on the same line as the step it records.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             RealClock().WallNow().time_since_epoch())
      .count();
}

Span Span::Start(std::string name, const SpanContext& parent, SpanKind kind,
                 std::optional<SpanId> id, std::optional<int64_t> start_ns) {
  Span span;
  span.exporter_ = CurrentExporter();
  if (!span.exporter_) return span;
  span.data_ = std::make_unique<SpanData>();
  SpanData& d = *span.data_;
  d.name = std::move(name);
  d.kind = kind;
  if (!AllZero(parent.trace_id)) {
    d.context.trace_id = parent.trace_id;
    d.context.sampled = parent.sampled;
    d.parent_span_id = parent.span_id;  // All zero: a root.
  } else {
    d.context.trace_id = NewTraceId();
  }
  d.context.span_id = id && !AllZero(*id) ? *id : NewSpanId();
  d.start_ns = start_ns ? *start_ns : NowNs();
  return span;
}

Span& Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    End();
    data_ = std::move(other.data_);
    exporter_ = std::move(other.exporter_);
  }
  return *this;
}

SpanContext Span::context() const {
  return data_ ? data_->context : SpanContext{};
}

Span& Span::Set(std::string key, AttributeValue value) {
  if (!data_) return *this;
  for (Attribute& a : data_->attributes) {
    if (a.key == key) {
      a.value = std::move(value);
      return *this;
    }
  }
  data_->attributes.push_back({std::move(key), std::move(value)});
  return *this;
}

void Span::AddEvent(std::string name, std::vector<Attribute> attributes) {
  if (!data_) return;
  data_->events.push_back({std::move(name), NowNs(), std::move(attributes)});
}

void Span::AddEventAt(int64_t time_ns, std::string name,
                      std::vector<Attribute> attributes) {
  if (!data_) return;
  data_->events.push_back({std::move(name), time_ns, std::move(attributes)});
}

void Span::SetError(std::string message) {
  if (!data_) return;
  data_->status = SpanStatus::kError;
  data_->status_message = std::move(message);
}

void Span::SetOk() {
  if (!data_) return;
  data_->status = SpanStatus::kOk;
  data_->status_message.clear();
}

void Span::End(std::optional<int64_t> end_ns) {
  if (!data_) return;
  data_->end_ns = end_ns ? *end_ns : NowNs();
  if (data_->end_ns < data_->start_ns) data_->end_ns = data_->start_ns;
  std::unique_ptr<SpanData> data = std::move(data_);
  std::shared_ptr<SpanExporter> exporter = std::move(exporter_);
  exporter->Export(std::move(*data));
}

}  // namespace steps::trace
