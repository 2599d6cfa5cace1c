// The `run` and `status` tools of `steps mcp`: starting a run in the
// background and following it to its outcome.
//
// A run is `steps run FILE --via mcp ...` started from this very binary as
// the leader of a session of its own, so it has the guardian, the lock and
// the record of any run, and goes on when the server ends or its client
// hangs up. Its console output goes to STATE_DIR/mcp/RUN_ID.log.
#ifndef STEPS_CLI_MCP_RUNS_H_
#define STEPS_CLI_MCP_RUNS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cli/mcp_server.h"
#include "cli/mcp_tools.h"

namespace steps::cli {

// The runs this server started, until they are reaped. Thread-safe.
class LaunchedRuns {
 public:
  struct Launch {
    pid_t pid = 0;
    std::string log_path;
    // How the `steps run` process ended ("exited with code 65"); unset
    // while it runs.
    std::optional<std::string> ended;
  };

  void Add(const std::string& run_id, Launch launch);
  // Reaps the processes of the runs that have ended. A run's process that
  // died without recording its end would otherwise stay a zombie, which the
  // store's reader takes for a live run ("running", not "interrupted").
  void ReapEnded();
  // The run started under this id, with every ended process reaped first.
  std::optional<Launch> Find(const std::string& run_id);

 private:
  void ReapEndedLocked();  // REQUIRES: mutex_ held.

  std::mutex mutex_;
  std::map<std::string, Launch> runs_;
};

McpTool RunTool(const McpToolsOptions& options,
                std::shared_ptr<LaunchedRuns> launched);
McpTool StatusTool(const McpToolsOptions& options,
                   std::shared_ptr<LaunchedRuns> launched);

}  // namespace steps::cli

#endif  // STEPS_CLI_MCP_RUNS_H_
