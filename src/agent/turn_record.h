// How a turn's record keeps an answer's text and a tool call's arguments
// and result: cut on a UTF-8 boundary, the same for a turn recorded as it
// happens and one rebuilt from the checkpoints of a resumed run.
#ifndef STEPS_AGENT_TURN_RECORD_H_
#define STEPS_AGENT_TURN_RECORD_H_

#include <string>

#include "agent/agent.h"
#include "core/utf8.h"  // CutText

namespace steps::agent {

// Bound on what a turn record keeps of an answer's text.
inline constexpr size_t kRecordTextBytes = 4000;

// An answer's text as a turn record keeps it.
inline std::string RecordedText(const std::string& text) {
  return CutText(text, kRecordTextBytes);
}

// `text` cut to ToolCallRecord::kRecordToolBytes (no ellipsis: the record
// says it was cut); sets `truncated` when it was.
std::string CutToolText(const std::string& text, bool& truncated);

// A tool call's record once it ran with `content` as its result.
ToolCallRecord RecordedCall(const ToolCall& call, const std::string& content,
                            bool is_error);

}  // namespace steps::agent

#endif  // STEPS_AGENT_TURN_RECORD_H_
