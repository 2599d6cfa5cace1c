#include "agent/turn_record.h"

#include "tools/text.h"

namespace steps::agent {

std::string CutToolText(const std::string& text, bool& truncated) {
  constexpr size_t kMax = ToolCallRecord::kRecordToolBytes;
  truncated = text.size() > kMax;
  return truncated ? text.substr(0, Utf8PrefixLength(text, kMax)) : text;
}

ToolCallRecord RecordedCall(const ToolCall& call, const std::string& content,
                            bool is_error) {
  ToolCallRecord r;
  r.name = call.name;
  r.arguments = CutToolText(call.arguments, r.arguments_truncated);
  r.result = CutToolText(content, r.result_truncated);
  r.result_bytes = static_cast<int64_t>(content.size());
  r.is_error = is_error;
  return r;
}

}  // namespace steps::agent
