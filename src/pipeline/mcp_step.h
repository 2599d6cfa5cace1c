// The MCP servers of one agent step (docs/mcp.md): started before its
// conversation, their granted tools offered beside the others, stopped when
// the step ends. Internal to the executor.
#ifndef STEPS_PIPELINE_MCP_STEP_H_
#define STEPS_PIPELINE_MCP_STEP_H_

#include <memory>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "core/cancel.h"
#include "core/clock.h"
#include "core/status.h"
#include "pipeline/environment.h"
#include "pipeline/model.h"

namespace steps {
class McpClient;
class ProcessLauncher;
}  // namespace steps

namespace steps::pipeline::internal {

// The started servers of one step. Destroying it stops them (each one's
// process group: SIGTERM, then SIGKILL after a short grace).
class McpStepServers {
 public:
  McpStepServers() = default;
  ~McpStepServers();
  McpStepServers(McpStepServers&&) = default;
  McpStepServers& operator=(McpStepServers&&) = default;

  bool empty() const { return clients_.empty(); }

 private:
  friend Status StartMcpServers(const Pipeline&, agent::AgentInvocation&,
                                ProcessLauncher&, Clock&, const CancelToken&,
                                const EnvLookup&, McpStepServers&);
  std::vector<std::shared_ptr<McpClient>> clients_;
};

// True when `tools` (an agent entry's grants) names an MCP server or one of
// its tools.
bool GrantsMcpTools(const Pipeline& p, const std::vector<std::string>& tools);
// How many MCP servers `tools` grants (each started once per step).
size_t McpServersGranted(const Pipeline& p,
                         const std::vector<std::string>& tools);

// Starts, in `inv.working_dir`, each server whose tools `inv.tools` grants,
// one after the other, each within its startup_timeout and all within the
// step's deadline (inv.timeout from now). Then rewrites `inv`: each MCP
// grant in inv.tools becomes the names of the tools it grants
// (SERVER__TOOL), those tools join inv.command_tools, and inv.timeout
// shrinks by the time the start took, so the step's deadline stays where
// it was. Errors, each naming the server: it could not start, failed its
// handshake or ran out of time (kDeadlineExceeded), the step was cancelled
// (kCancelled), a granted tool it does not have, two tools offered under
// one name (kInvalidArgument).
Status StartMcpServers(const Pipeline& p, agent::AgentInvocation& inv,
                       ProcessLauncher& launcher, Clock& clock,
                       const CancelToken& cancel, const EnvLookup& lookup,
                       McpStepServers& servers);

}  // namespace steps::pipeline::internal

#endif  // STEPS_PIPELINE_MCP_STEP_H_
