// CLI sources (`source: {cli: COMMAND}`): a coding-agent command run in the
// step's working directory with the conversation on stdin; its stdout is
// the answer.
#ifndef STEPS_AGENT_CLI_SOURCE_H_
#define STEPS_AGENT_CLI_SOURCE_H_

#include <map>
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

// What a CLI source keeps of the launcher's base environment: enough to
// find programs, a home, a locale and a terminal type, nothing secret.
// Everything else it sees comes from its source's `env:`.
extern const std::vector<std::string> kCliSourceBaseEnv;

// Runs `command` through bash in `working_dir` with `prompt` on stdin,
// until it exits, `deadline` passes or `cancel` fires (the process group is
// killed then). Its environment is kCliSourceBaseEnv from the launcher's
// base with `env` set over it. stdout and stderr are each captured up to
// 16 MiB.
ProcessResult RunCliAgent(ProcessLauncher& launcher, const std::string& command,
                          const std::map<std::string, std::string>& env,
                          const std::string& working_dir,
                          const std::string& prompt, Deadline deadline,
                          const CancelToken& cancel);

// The last `max_bytes` of `text`, trimmed, for error messages.
std::string TailForMessage(const std::string& text, size_t max_bytes = 400);

}  // namespace steps::agent

#endif  // STEPS_AGENT_CLI_SOURCE_H_
