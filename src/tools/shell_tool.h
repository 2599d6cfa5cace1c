// run_shell: a command through bash in the working directory, bounded in
// time and output, killed with its whole process group when it overruns.
#ifndef STEPS_TOOLS_SHELL_TOOL_H_
#define STEPS_TOOLS_SHELL_TOOL_H_

#include "tools/tool.h"

namespace steps {

// run_shell {command}: runs `bash -c command` through context.launcher in
// context.working_dir with stdin from /dev/null, stdout and stderr
// interleaved. Time: min(tool_timeout, time left to the deadline); past it,
// the process group gets SIGTERM, then SIGKILL after
// limits.shell_kill_grace. The result starts with one status line
// ("exit code: N", "timed out after 30s (tool_timeout) ...") followed by the
// output (its head and tail when over limits.max_output_bytes). is_error
// unless the command exited 0. With context.sandbox set, the command runs
// under bwrap: only the working directory writable, no network unless the
// options keep it.
class RunShellTool : public Tool {
 public:
  RunShellTool();

 protected:
  ToolResult Run(const nlohmann::json& arguments,
                 const ToolContext& context) const override;
};

}  // namespace steps

#endif  // STEPS_TOOLS_SHELL_TOOL_H_
