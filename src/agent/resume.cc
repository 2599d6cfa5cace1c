#include "agent/resume.h"

#include <algorithm>
#include <set>
#include <string>

#include "agent/turn_record.h"

namespace steps::agent {

ResumedConversation RebuildConversation(
    const std::vector<ConversationCheckpoint>& checkpoints) {
  using Kind = ConversationCheckpoint::Kind;
  ResumedConversation out;
  std::vector<ToolCall> last_calls;  // Of the last answer.
  std::set<std::string> started, finished;
  for (const ConversationCheckpoint& cp : checkpoints) {
    out.messages.insert(out.messages.end(), cp.messages.begin(),
                        cp.messages.end());
    switch (cp.kind) {
      case Kind::kRequest:
        out.nudged = out.nudged || cp.nudge;
        break;
      case Kind::kAnswer: {
        AgentTurnRecord& record = out.turn_records.emplace_back();
        record.turn = cp.turn;
        record.provider_requests = cp.provider_requests;
        record.source = cp.source;
        record.prompt_tokens = cp.prompt_tokens;
        record.completion_tokens = cp.completion_tokens;
        record.usd = cp.usd;
        out.turns = std::max(out.turns, cp.turn);
        out.provider_requests += cp.provider_requests;
        out.prompt_tokens += cp.prompt_tokens;
        out.completion_tokens += cp.completion_tokens;
        out.usd += cp.usd;
        last_calls.clear();
        started.clear();
        finished.clear();
        for (const Message& m : cp.messages) {
          if (m.role != Role::kAssistant) continue;
          last_calls = m.tool_calls;
          record.text = RecordedText(m.content);
        }
        break;
      }
      case Kind::kToolStarted:
        started.insert(cp.call_id);
        break;
      case Kind::kToolFinished:
        finished.insert(cp.call_id);
        if (!out.turn_records.empty()) {
          ToolCall call{cp.call_id, cp.tool, cp.arguments};
          for (const ToolCall& c : last_calls) {
            if (c.id == cp.call_id) call = c;
          }
          const std::string& result =
              cp.messages.empty() ? std::string() : cp.messages.back().content;
          out.turn_records.back().tool_calls.push_back(
              RecordedCall(call, result, cp.is_error));
        }
        break;
    }
  }
  for (const ToolCall& call : last_calls) {
    if (finished.count(call.id) > 0) continue;
    out.unfinished_calls.push_back(call);
    if (started.count(call.id) > 0) out.restarted.push_back(call.id);
  }
  return out;
}

}  // namespace steps::agent
