// CLI sources (`source: {cli: COMMAND}`): a coding-agent command run in the
// step's working directory with the conversation on stdin; its stdout is
// the answer.
#ifndef STEPS_AGENT_CLI_SOURCE_H_
#define STEPS_AGENT_CLI_SOURCE_H_

#include <string>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "process/process.h"
#include "providers/chat.h"

namespace steps::agent {

// The conversation as plain text for a CLI agent's stdin: each message
// under a "## ROLE" heading (tool calls and results included), in order.
std::string RenderTranscript(const std::vector<Message>& messages);

// Runs `command` through bash in `working_dir` with `prompt` on stdin,
// until it exits, `deadline` passes or `cancel` fires (the process group is
// killed then). stdout and stderr are each captured up to 16 MiB.
ProcessResult RunCliAgent(ProcessLauncher& launcher, const std::string& command,
                          const std::string& working_dir,
                          const std::string& prompt, Deadline deadline,
                          const CancelToken& cancel);

// The last `max_bytes` of `text`, trimmed, for error messages.
std::string TailForMessage(const std::string& text, size_t max_bytes = 400);

}  // namespace steps::agent

#endif  // STEPS_AGENT_CLI_SOURCE_H_
