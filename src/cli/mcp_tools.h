// The tools `steps mcp` serves (docs/mcp.md, "steps as an MCP server"):
// validate, explain, run, status, show, runs, approve and reject. Each does
// what the command of that name does and answers with the text it prints.
#ifndef STEPS_CLI_MCP_TOOLS_H_
#define STEPS_CLI_MCP_TOOLS_H_

#include <string>
#include <vector>

#include "cli/mcp_server.h"
#include "core/status.h"

namespace steps::cli {

struct McpToolsOptions {
  // The folder every path argument is resolved against and must lie under
  // (symbolic links followed). Absolute. The server's working directory is
  // this folder, so relative paths read as on the command line.
  std::string root;
  // Where runs are recorded, as `--state-dir` of `steps run` (relative to
  // root, or absolute). Default: ".steps".
  std::string state_dir = ".steps";
  // The `steps` binary that `run` starts. Default: this very binary.
  std::string steps_binary = "/proc/self/exe";
  // How long `status` may wait at most (its wait_seconds). Default: 600 s.
  int max_wait_seconds = 600;
};

// The tools, sharing one record of the runs this server started.
std::vector<McpTool> StepsMcpTools(const McpToolsOptions& options);

// The `instructions` of the server's `initialize` answer.
std::string StepsMcpInstructions();

// `path` as the tools read it: refused when empty, "-" (standard input),
// outside `root` once symbolic links are followed, or a FIFO, socket or
// device (reading one may never end); otherwise as written
// (relative paths are relative to root, the working directory).
Result<std::string> ResolveUnderRoot(const std::string& root,
                                     const std::string& path);

}  // namespace steps::cli

#endif  // STEPS_CLI_MCP_TOOLS_H_
