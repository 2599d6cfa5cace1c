#include "telemetry/otlp_encode.h"

#include <cstring>
#include <type_traits>

#include "core/json_text.h"
#include "core/utf8.h"

namespace steps::telemetry {
namespace {

// ---- protobuf: the wire format's three shapes we need ----

enum WireType { kVarint = 0, kFixed64 = 1, kLength = 2 };

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void PutTag(std::string& out, int field, WireType type) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | type);
}

void PutBytes(std::string& out, int field, std::string_view bytes) {
  PutTag(out, field, kLength);
  PutVarint(out, bytes.size());
  out += bytes;
}

// A string field: proto3 strings must be UTF-8, so invalid bytes are
// replaced as the JSON writer replaces them.
void PutString(std::string& out, int field, std::string_view text) {
  if (IsValidUtf8(text)) {
    PutBytes(out, field, text);
  } else {
    PutBytes(out, field, SanitizeUtf8(text));
  }
}

void PutFixed64(std::string& out, int field, uint64_t v) {
  PutTag(out, field, kFixed64);
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i));
}

void PutDouble(std::string& out, int field, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  PutFixed64(out, field, bits);
}

template <size_t N>
std::string_view IdBytes(const std::array<uint8_t, N>& id) {
  return {reinterpret_cast<const char*>(id.data()), N};
}

// AnyValue: string 1, bool 2, int 3, double 4, array 5.
std::string AnyValue(const trace::AttributeValue& v) {
  std::string out;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          PutString(out, 1, x);
        } else if constexpr (std::is_same_v<T, bool>) {
          PutTag(out, 2, kVarint);
          PutVarint(out, x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          PutTag(out, 3, kVarint);
          PutVarint(out, static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          PutDouble(out, 4, x);
        } else {
          std::string array;  // ArrayValue { repeated AnyValue values = 1; }
          for (const std::string& s : x)
            PutBytes(array, 1, AnyValue(trace::AttributeValue(s)));
          PutBytes(out, 5, array);
        }
      },
      v);
  return out;
}

// KeyValue { key 1, value 2 }, as field `field` of the enclosing message.
void PutAttributes(std::string& out, int field,
                   const std::vector<trace::Attribute>& attributes) {
  for (const trace::Attribute& a : attributes) {
    std::string kv;
    PutString(kv, 1, a.key);
    PutBytes(kv, 2, AnyValue(a.value));
    PutBytes(out, field, kv);
  }
}

std::string SpanMessage(const trace::SpanData& s) {
  std::string out;
  PutBytes(out, 1, IdBytes(s.context.trace_id));
  PutBytes(out, 2, IdBytes(s.context.span_id));
  bool root = true;
  for (uint8_t b : s.parent_span_id) root = root && b == 0;
  if (!root) PutBytes(out, 4, IdBytes(s.parent_span_id));
  PutString(out, 5, s.name);
  PutTag(out, 6, kVarint);
  PutVarint(out, static_cast<uint64_t>(s.kind));
  PutFixed64(out, 7, static_cast<uint64_t>(s.start_ns));
  PutFixed64(out, 8, static_cast<uint64_t>(s.end_ns));
  PutAttributes(out, 9, s.attributes);
  for (const trace::SpanEvent& e : s.events) {
    std::string event;  // Event { time 1, name 2, attributes 3 }
    PutFixed64(event, 1, static_cast<uint64_t>(e.time_ns));
    PutString(event, 2, e.name);
    PutAttributes(event, 3, e.attributes);
    PutBytes(out, 11, event);
  }
  if (s.status != trace::SpanStatus::kUnset) {
    std::string status;  // Status { message 2, code 3 }
    if (!s.status_message.empty()) PutString(status, 2, s.status_message);
    PutTag(status, 3, kVarint);
    PutVarint(status, static_cast<uint64_t>(s.status));
    PutBytes(out, 15, status);
  }
  return out;
}

// ---- OTLP/JSON ----

void JsonString(std::string& out, std::string_view text) {
  AppendJsonString(out, text);
}

void JsonAnyValue(std::string& out, const trace::AttributeValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out += "{\"stringValue\":";
          JsonString(out, x);
          out += '}';
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "{\"boolValue\":true}" : "{\"boolValue\":false}";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out += "{\"intValue\":\"" + std::to_string(x) + "\"}";
        } else if constexpr (std::is_same_v<T, double>) {
          out += "{\"doubleValue\":" + DumpJson(nlohmann::json(x)) + "}";
        } else {
          out += "{\"arrayValue\":{\"values\":[";
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) out += ',';
            JsonAnyValue(out, trace::AttributeValue(x[i]));
          }
          out += "]}}";
        }
      },
      v);
}

void JsonAttributes(std::string& out,
                    const std::vector<trace::Attribute>& attributes) {
  out += "\"attributes\":[";
  for (size_t i = 0; i < attributes.size(); ++i) {
    if (i) out += ',';
    out += "{\"key\":";
    JsonString(out, attributes[i].key);
    out += ",\"value\":";
    JsonAnyValue(out, attributes[i].value);
    out += '}';
  }
  out += ']';
}

void JsonSpan(std::string& out, const trace::SpanData& s) {
  out += "{\"traceId\":\"" +
         trace::Hex(s.context.trace_id.data(), s.context.trace_id.size()) +
         "\",\"spanId\":\"" +
         trace::Hex(s.context.span_id.data(), s.context.span_id.size()) + "\"";
  bool root = true;
  for (uint8_t b : s.parent_span_id) root = root && b == 0;
  if (!root) {
    out += ",\"parentSpanId\":\"" +
           trace::Hex(s.parent_span_id.data(), s.parent_span_id.size()) + "\"";
  }
  out += ",\"name\":";
  JsonString(out, s.name);
  out += ",\"kind\":" + std::to_string(static_cast<int>(s.kind));
  out += ",\"startTimeUnixNano\":\"" + std::to_string(s.start_ns) + "\"";
  out += ",\"endTimeUnixNano\":\"" + std::to_string(s.end_ns) + "\",";
  JsonAttributes(out, s.attributes);
  out += ",\"events\":[";
  for (size_t i = 0; i < s.events.size(); ++i) {
    if (i) out += ',';
    out += "{\"timeUnixNano\":\"" + std::to_string(s.events[i].time_ns) +
           "\",\"name\":";
    JsonString(out, s.events[i].name);
    out += ',';
    JsonAttributes(out, s.events[i].attributes);
    out += '}';
  }
  out += "],\"status\":{";
  if (s.status != trace::SpanStatus::kUnset) {
    out += "\"code\":" + std::to_string(static_cast<int>(s.status));
    if (!s.status_message.empty()) {
      out += ",\"message\":";
      JsonString(out, s.status_message);
    }
  }
  out += "}}";
}

}  // namespace

std::string EncodeProtobuf(const ExportResource& resource,
                           const std::vector<trace::SpanData>& spans) {
  std::string res;  // Resource { attributes 1 }
  PutAttributes(res, 1, resource.attributes);
  std::string scope;  // InstrumentationScope { name 1, version 2 }
  PutString(scope, 1, resource.scope_name);
  if (!resource.scope_version.empty())
    PutString(scope, 2, resource.scope_version);
  std::string scope_spans;  // ScopeSpans { scope 1, spans 2 }
  PutBytes(scope_spans, 1, scope);
  for (const trace::SpanData& s : spans)
    PutBytes(scope_spans, 2, SpanMessage(s));
  std::string resource_spans;  // ResourceSpans { resource 1, scope_spans 2 }
  PutBytes(resource_spans, 1, res);
  PutBytes(resource_spans, 2, scope_spans);
  std::string request;  // ExportTraceServiceRequest { resource_spans 1 }
  PutBytes(request, 1, resource_spans);
  return request;
}

std::string EncodeJson(const ExportResource& resource,
                       const std::vector<trace::SpanData>& spans) {
  std::string out = "{\"resourceSpans\":[{\"resource\":{";
  JsonAttributes(out, resource.attributes);
  out += "},\"scopeSpans\":[{\"scope\":{\"name\":";
  JsonString(out, resource.scope_name);
  if (!resource.scope_version.empty()) {
    out += ",\"version\":";
    JsonString(out, resource.scope_version);
  }
  out += "},\"spans\":[";
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i) out += ',';
    JsonSpan(out, spans[i]);
  }
  out += "]}]}]}";
  return out;
}

}  // namespace steps::telemetry
