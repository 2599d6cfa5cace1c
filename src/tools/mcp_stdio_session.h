// MCP's stdio transport: the server is a child process started by steps,
// spoken to over its stdin and stdout (JSON-RPC 2.0, one message per line;
// see docs/mcp.md). Its stderr is logged at debug and its tail quoted in
// errors. Stopping the session stops the process group (SIGTERM, then
// SIGKILL after options.kill_grace).
#ifndef STEPS_TOOLS_MCP_STDIO_SESSION_H_
#define STEPS_TOOLS_MCP_STDIO_SESSION_H_

#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "tools/mcp_client.h"
#include "tools/mcp_session.h"

namespace steps {

class ProcessLauncher;

// Starts spec.argv (or spec.command through bash) in `working_dir` with
// spec.env. kUnavailable when it cannot start. `clock` must outlive the
// session.
Result<std::unique_ptr<McpSession>> StartMcpStdioSession(
    const McpServerSpec& spec, ProcessLauncher& launcher,
    const std::string& working_dir, Clock& clock,
    const McpClientOptions& options);

}  // namespace steps

#endif  // STEPS_TOOLS_MCP_STDIO_SESSION_H_
