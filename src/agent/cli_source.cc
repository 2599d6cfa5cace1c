#include "agent/cli_source.h"

namespace steps::agent {

std::string RenderTranscript(const std::vector<Message>& messages) {
  std::string out;
  for (const Message& m : messages) {
    if (!out.empty()) out += "\n\n";
    out += "## ";
    out += RoleName(m.role);
    if (m.role == Role::kTool && !m.tool_name.empty()) {
      out += " (" + m.tool_name + ")";
    }
    out += "\n\n";
    out += m.content;
    for (const ToolCall& call : m.tool_calls) {
      out += "\n[tool call] " + call.name + " " + call.arguments;
    }
  }
  out += "\n";
  return out;
}

const std::vector<std::string> kCliSourceBaseEnv = {
    "PATH",   "HOME",     "USER", "LOGNAME", "SHELL", "LANG",
    "LC_ALL", "LC_CTYPE", "TERM", "TZ",      "TMPDIR"};

ProcessResult RunCliAgent(ProcessLauncher& launcher, const std::string& command,
                          const std::map<std::string, std::string>& env,
                          const std::string& working_dir,
                          const std::string& prompt, Deadline deadline,
                          const CancelToken& cancel) {
  ProcessRequest request = ProcessRequest::Shell(command);
  request.inherit_only = kCliSourceBaseEnv;
  request.env = env;
  request.working_dir = working_dir;
  request.stdin_text = prompt;
  request.deadline = deadline;
  request.cancel = cancel;
  request.max_captured_bytes = 16 * 1024 * 1024;
  request.keep = OutputKeep::kHead;
  return launcher.Run(request);
}

std::string TailForMessage(const std::string& text, size_t max_bytes) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  std::string trimmed = text.substr(0, end + 1);
  if (trimmed.size() <= max_bytes) return trimmed;
  return "..." + trimmed.substr(trimmed.size() - max_bytes);
}

}  // namespace steps::agent
