#include "tools/shell_tool.h"

#include <optional>
#include <string>

#include "process/process.h"
#include "process/sandbox_bwrap.h"
#include "tools/arguments.h"
#include "tools/sandbox.h"

namespace steps {

RunShellTool::RunShellTool()
    : Tool("run_shell",
           "Run a shell command with bash in the working directory. Returns "
           "the exit code and the combined stdout and stderr. Commands are "
           "killed when they exceed the tool timeout.",
           StringArgumentsSchema({{"command", "The bash command to run"}})) {}

ToolResult RunShellTool::Run(const nlohmann::json& arguments,
                             const ToolContext& context) const {
  Result<std::string> command = StringArgument(arguments, name(), "command");
  if (!command.ok()) return ToolResult::Error(command.status().message());
  if (command->find_first_not_of(" \t\r\n") == std::string::npos) {
    return ToolResult::Error(name() + ": the command is empty");
  }
  if (command->find('\0') != std::string::npos) {
    return ToolResult::Error(name() + ": the command contains a NUL byte");
  }
  BashScript run;
  run.script = *command;
  run.timeout = context.tool_timeout;
  return RunBashScript(name(), run, context);
}

namespace {

// The process run.script becomes: bash in `root`, with the tool's
// environment, bounded by the earlier of the step's deadline and the
// tool's own timeout.
ProcessRequest BashRequest(const BashScript& run, const ToolContext& context,
                           const std::string& root) {
  ProcessRequest request = ProcessRequest::Shell(run.script);
  if (context.sandbox) {
    SandboxOptions options = *context.sandbox;
    options.writable_dir = root;
    request = ProcessRequest::Exec(
        WrapInSandbox({"bash", "-c", run.script}, options));
  }
  request.working_dir = root;
  request.env = context.env;
  for (const auto& [k, v] : run.env) request.env[k] = v;
  request.stdin_text = run.stdin_text;
  request.cancel = context.cancel;
  request.deadline = context.deadline;
  if (run.timeout > Millis(0)) {
    request.deadline =
        request.deadline.Earlier(Deadline::After(context.clock, run.timeout));
  }
  request.kill_grace = context.limits.shell_kill_grace;
  request.merge_stderr = true;
  request.max_captured_bytes = context.limits.max_output_bytes;
  request.keep = OutputKeep::kHeadAndTail;
  return request;
}

// How the command ended, as the model reads it ("exit code: 0", "timed out
// after 5s (tool_timeout); the command was killed", ...).
// `by_tool_timeout`: the tool's own timeout, not the step's deadline, was
// the nearer limit.
std::string DescribeEnd(const ProcessResult& result, const BashScript& run,
                        bool by_tool_timeout) {
  switch (result.end) {
    case ProcessEnd::kExited:
      return "exit code: " + std::to_string(result.exit_code.value_or(-1));
    case ProcessEnd::kSignaled:
      return "command " + result.Describe();
    case ProcessEnd::kTimedOut:
      return by_tool_timeout
                 ? "timed out after " + FormatDuration(run.timeout) + " (" +
                       run.timeout_name + "); the command was killed"
                 : "stopped: the step's deadline was reached; the command "
                   "was killed";
    case ProcessEnd::kCancelled:
      return "cancelled; the command was killed";
    case ProcessEnd::kFailedToStart:
      return "could not start the command: " + result.error;
    case ProcessEnd::kLost:
      return "the command was lost: " + result.error;
  }
  return "ended";
}

}  // namespace

ToolResult RunBashScript(const std::string& tool, const BashScript& run,
                         const ToolContext& context) {
  // The same root the file tools see, so a command starts where they do.
  Result<Sandbox> sandbox = Sandbox::Open(context.working_dir);
  if (!sandbox.ok()) {
    return ToolResult::Error(tool + ": " + sandbox.status().message());
  }
  std::optional<Millis> left = context.deadline.Remaining(context.clock);
  if (left && *left <= Millis(0)) {
    return ToolResult::Error(tool +
                             ": not run: the step's deadline has passed");
  }
  // Which limit will stop the command first decides how a timeout reads.
  bool by_tool_timeout =
      run.timeout > Millis(0) && (!left || run.timeout < *left);

  const std::string root = sandbox->root();
  if (root.empty()) {
    return ToolResult::Error(tool +
                             ": cannot tell where the working directory " +
                             context.working_dir + " lies");
  }
  ProcessResult result = context.launcher.Run(BashRequest(run, context, root));
  std::string status = DescribeEnd(result, run, by_tool_timeout);
  if (result.end == ProcessEnd::kFailedToStart) {
    return ToolResult::Error(tool + ": " + status);
  }
  bool is_error = result.end != ProcessEnd::kExited || result.exit_code != 0;
  std::string content =
      is_error || run.status_on_success ? status + "\n" : std::string();
  if (result.out.total_bytes == 0) {
    content += "(no output)\n";
  } else {
    content += result.out.text;
    if (content.back() != '\n') content += '\n';
  }
  return {std::move(content), is_error};
}

}  // namespace steps
