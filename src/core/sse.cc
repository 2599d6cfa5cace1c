#include "core/sse.h"

namespace steps {

std::vector<SseEvent> SseParser::Feed(std::string_view piece) {
  std::vector<SseEvent> out;
  partial_.append(piece);
  size_t start = 0;
  while (true) {
    size_t nl = partial_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(partial_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Line(line, out);
    start = nl + 1;
  }
  partial_.erase(0, start);
  return out;
}

void SseParser::Line(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) {
    if (has_fields_) out.push_back(std::move(pending_));
    pending_ = SseEvent();
    has_fields_ = false;
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // Comment (keep-alive ping).
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data += '\n';
    pending_.data.append(value);
    has_data_ = true;
    has_fields_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
    has_fields_ = true;
  }
}

}  // namespace steps
