// `steps mcp [--root DIR] [--state-dir DIR]`: steps as a Model Context
// Protocol server over stdio, for coding agents (docs/mcp.md).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/mcp_server.h"
#include "cli/mcp_tools.h"

namespace steps::cli {
namespace {

struct McpOptions {
  std::string root = ".";
  std::string state_dir = ".steps";
};

int RunMcp(const McpOptions& opts) {
  // A client may close its end of our standard error to ignore the logs:
  // a failed log line must not end the server. Runs it starts get every
  // signal's default back (process/spawn.h).
  signal(SIGPIPE, SIG_IGN);
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::canonical(opts.root, ec);
  if (ec || !std::filesystem::is_directory(root, ec)) {
    std::cerr << "steps mcp: --root " << opts.root
              << ": not a folder we can serve"
              << (ec ? " (" + ec.message() + ")" : std::string()) << "\n";
    return kExitUsage;
  }
  // Before any thread starts: relative paths (tool arguments, the state
  // folder) then read as they would on a command line in the root.
  if (chdir(root.c_str()) != 0) {
    std::cerr << "steps mcp: --root " << opts.root << ": "
              << std::strerror(errno) << "\n";
    return kExitUsage;
  }
  McpToolsOptions tools;
  tools.root = root.string();
  tools.state_dir = opts.state_dir;
  McpServerOptions server_options;
  server_options.version = STEPS_VERSION;
  server_options.instructions = StepsMcpInstructions();
  McpServer server(StepsMcpTools(tools), server_options);
  std::cerr << "steps mcp: serving " << tools.root
            << " over stdio (runs recorded in " << opts.state_dir << ")"
            << std::endl;
  server.Serve(STDIN_FILENO, STDOUT_FILENO);
  std::cerr << "steps mcp: end of input; runs started here go on in the "
               "background"
            << std::endl;
  return kExitOk;
}

}  // namespace

Command McpCommand() {
  return {
      "mcp",
      "Serve steps to coding agents over the Model Context Protocol (stdio)",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<McpOptions>();
        app.add_option("--root", opts->root,
                       "The folder served: tool paths are resolved against "
                       "it and must lie inside it")
            ->capture_default_str();
        app.add_option("--state-dir", opts->state_dir,
                       "Where runs are recorded (relative to --root)")
            ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
        app.footer(
            "Speaks MCP (JSON-RPC 2.0, one message a line) on standard input "
            "and output;\n"
            "logs go to standard error. Tools: validate, explain, run "
            "(starts a run in the\n"
            "background and answers with its id), status, show, runs, "
            "approve and reject\n"
            "(decide a gate as the user running this server). A run started "
            "here is\n"
            "its own process and goes on when the server ends (end of input); "
            "its `Taken by:`\n"
            "says (via mcp). Configure a client with e.g. "
            "`claude mcp add steps -- steps mcp`.\n"
            "See docs/mcp.md, \"steps as an MCP server\".");
        return [opts] { return RunMcp(*opts); };
      }};
}

}  // namespace steps::cli
