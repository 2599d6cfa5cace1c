// The conversation log: every durable point of every agent conversation
// (agent::ConversationCheckpoint), one row each, in order. Together the
// rows of a step hold its whole message history, byte for byte except
// secret values (masked before they reach the store), which `steps resume`
// rebuilds a conversation from (docs/resume.md).
#ifndef STEPS_STORE_CONVERSATION_LOG_H_
#define STEPS_STORE_CONVERSATION_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent.h"
#include "core/status.h"
#include "store/sqlite.h"

namespace steps::store {

// "request", "answer", "tool_started", "tool_finished".
std::string_view CheckpointKindName(agent::ConversationCheckpoint::Kind kind);

// The checkpoint as the JSON stored in conversation_log.checkpoint (its
// kind and turn are columns of their own).
std::string CheckpointJson(const agent::ConversationCheckpoint& checkpoint);

// Appends one row. `seq` numbers the step's rows from 1.
Status WriteCheckpoint(Db& db, const std::string& run_id,
                       const std::string& step_id, int64_t seq, int64_t at_ms,
                       const agent::ConversationCheckpoint& checkpoint);

// The step's checkpoints, in order. kInvalidArgument names the row that
// does not read back (a store written by something else).
Result<std::vector<agent::ConversationCheckpoint>> ReadConversationLog(
    Db& db, const std::string& run_id, const std::string& step_id);

}  // namespace steps::store

#endif  // STEPS_STORE_CONVERSATION_LOG_H_
