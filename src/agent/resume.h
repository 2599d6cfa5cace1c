// Rebuilding an interrupted conversation from its durable checkpoints, for
// `steps resume` (docs/resume.md). Pure: the caller reads the checkpoints
// (store/conversation_log.h) and hands the result in through
// AgentInvocation::resume_from.
#ifndef STEPS_AGENT_RESUME_H_
#define STEPS_AGENT_RESUME_H_

#include <vector>

#include "agent/agent.h"

namespace steps::agent {

// The conversation the checkpoints hold, in order: every message; the last
// answer's tool calls without a kToolFinished (those with a kToolStarted
// listed as restarted); the turns, requests, tokens and cost of its answers.
ResumedConversation RebuildConversation(
    const std::vector<ConversationCheckpoint>& checkpoints);

}  // namespace steps::agent

#endif  // STEPS_AGENT_RESUME_H_
