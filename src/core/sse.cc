#include "core/sse.h"

namespace steps {

std::vector<SseEvent> SseParser::Feed(std::string_view piece) {
  std::vector<SseEvent> out;
  // The LF of a CRLF whose CR ended the last piece ends no line of its own.
  if (after_cr_ && !piece.empty()) {
    if (piece.front() == '\n') piece.remove_prefix(1);
    after_cr_ = false;
  }
  partial_.append(piece);
  size_t start = 0;
  size_t from = scanned_;
  while (true) {
    size_t end = partial_.find_first_of("\r\n", from);
    if (end == std::string::npos) break;
    Line(std::string_view(partial_.data() + start, end - start), out);
    if (partial_[end] == '\r') {
      if (end + 1 == partial_.size()) {
        after_cr_ = true;
      } else if (partial_[end + 1] == '\n') {
        ++end;
      }
    }
    start = end + 1;
    from = start;
  }
  partial_.erase(0, start);
  scanned_ = partial_.size();
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
