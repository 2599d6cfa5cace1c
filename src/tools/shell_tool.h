// run_shell: a command through bash in the working directory, bounded in
// time and output, killed with its whole process group when it overruns.
#ifndef STEPS_TOOLS_SHELL_TOOL_H_
#define STEPS_TOOLS_SHELL_TOOL_H_

#include <map>
#include <optional>
#include <string>

#include "tools/tool.h"

namespace steps {

// One bash script as run_shell and command tools run it.
struct BashScript {
  std::string script;
  // Written to the script's stdin; nullopt: stdin is /dev/null.
  std::optional<std::string> stdin_text;
  // Set over context.env.
  std::map<std::string, std::string> env;
  // The script's own limit, also bounded by the step's deadline. Zero or
  // negative: none of its own.
  Millis timeout{0};
  // How a timeout names the limit: "tool_timeout", "the tool's timeout".
  std::string timeout_name = "tool_timeout";
  // Whether a result of exit 0 starts with "exit code: 0" as well.
  bool status_on_success = true;
};

// Runs `run` in context.working_dir (under bwrap when context.sandbox is
// set), stdout and stderr interleaved and bounded by
// limits.max_output_bytes (head and tail), the process group killed past
// the limit. `tool` prefixes errors. See RunShellTool for the result.
ToolResult RunBashScript(const std::string& tool, const BashScript& run,
                         const ToolContext& context);

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
