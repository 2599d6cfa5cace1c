// OTLP's trace export request (opentelemetry/proto/collector/trace/v1/
// trace_service.proto) from ended spans, in the two encodings OTLP/HTTP
// takes: protobuf (written here field by field; the messages are small and
// fixed) and OTLP/JSON (ids in hex, 64-bit numbers as strings, enums as
// numbers).
#ifndef STEPS_TELEMETRY_OTLP_ENCODE_H_
#define STEPS_TELEMETRY_OTLP_ENCODE_H_

#include <string>
#include <vector>

#include "core/trace.h"

namespace steps::telemetry {

// What every span of the process shares: the resource's attributes
// (service.name, ...) and the instrumentation scope.
struct ExportResource {
  std::vector<trace::Attribute> attributes;
  std::string scope_name = "steps";
  std::string scope_version;
};

std::string EncodeProtobuf(const ExportResource& resource,
                           const std::vector<trace::SpanData>& spans);
std::string EncodeJson(const ExportResource& resource,
                       const std::vector<trace::SpanData>& spans);

}  // namespace steps::telemetry

#endif  // STEPS_TELEMETRY_OTLP_ENCODE_H_
