#include "pipeline/mcp_step.h"

#include <set>

#include <algorithm>
#include <map>
#include <utility>

#include "agent/conversation.h"
#include "core/log.h"
#include "tools/mcp_client.h"
#include "tools/mcp_tool.h"
#include "tools/registry.h"

namespace steps::pipeline::internal {
namespace {

constexpr Millis kDefaultStartupTimeout{30000};

McpServerSpec SpecFor(const McpServerDef& def, const EnvLookup& lookup) {
  McpServerSpec spec;
  spec.name = def.name;
  spec.argv = def.argv;
  spec.command = def.command;
  spec.env = ExpandEnv(def.env, lookup);
  spec.url = def.url;
  for (const auto& [name, value] : ExpandEnv(def.headers, lookup)) {
    spec.headers.emplace_back(name, value);
  }
  spec.startup_timeout =
      def.startup_timeout.value.value_or(kDefaultStartupTimeout);
  spec.tool_timeout = def.tool_timeout.value;
  return spec;
}

std::string ToolNames(const McpClient& client) {
  std::string names;
  for (const McpToolInfo& t : client.tools()) {
    names += (names.empty() ? "" : ", ") + t.name;
  }
  return names.empty() ? "none" : names;
}

// The tools one grant names, as McpTools of `client`.
Result<std::vector<std::shared_ptr<const Tool>>> ToolsOfGrant(
    const McpGrant& grant, const std::shared_ptr<McpClient>& client) {
  std::vector<std::shared_ptr<const Tool>> tools;
  for (const McpToolInfo& info : client->tools()) {
    std::string exposed = McpToolName(grant.server->name, info.name);
    bool wanted =
        grant.tool.empty() || (grant.by_exposed_name ? exposed == grant.tool
                                                     : info.name == grant.tool);
    if (wanted)
      tools.push_back(std::make_shared<McpTool>(exposed, client, info));
  }
  if (tools.empty() && !grant.tool.empty()) {
    return InvalidArgument("mcp server '" + grant.server->name +
                           "' has no tool '" + grant.tool +
                           "' (its tools: " + ToolNames(*client) + ")");
  }
  return tools;
}

// Two tools offered under one name, or an MCP tool under the name of a
// built-in or command tool, would leave the model unable to tell them
// apart.
Status CheckNames(const std::vector<std::shared_ptr<const Tool>>& tools,
                  const agent::AgentInvocation& inv) {
  std::map<std::string, const McpTool*> seen;
  for (const auto& tool : tools) {
    const auto* mcp = dynamic_cast<const McpTool*>(tool.get());
    if (mcp == nullptr) continue;
    bool other = ToolRegistry::BuiltIn().Find(mcp->name()) != nullptr ||
                 mcp->name() == agent::kFinishToolName;
    for (const auto& c : inv.command_tools) {
      other = other || (c && c->name() == mcp->name());
    }
    if (other) {
      return InvalidArgument("mcp server '" + mcp->server() + "': its tool '" +
                             mcp->remote_name() + "' would be offered as '" +
                             mcp->name() + "', the name of another tool");
    }
    auto [it, fresh] = seen.emplace(mcp->name(), mcp);
    if (!fresh && it->second != mcp &&
        (it->second->server() != mcp->server() ||
         it->second->remote_name() != mcp->remote_name())) {
      return InvalidArgument(
          "tool '" + it->second->remote_name() + "' of mcp server '" +
          it->second->server() + "' and tool '" + mcp->remote_name() +
          "' of mcp server '" + mcp->server() + "' would both be offered as '" +
          mcp->name() + "' — grant only one of them");
    }
  }
  return Status::Ok();
}

}  // namespace

McpStepServers::~McpStepServers() {
  for (const auto& client : clients_) client->Stop();
}

size_t McpServersGranted(const Pipeline& p,
                         const std::vector<std::string>& tools) {
  std::set<const void*> servers;
  for (const std::string& t : tools) {
    if (auto g = p.ParseMcpGrant(t); g && g->server) servers.insert(g->server);
  }
  return servers.size();
}

bool GrantsMcpTools(const Pipeline& p, const std::vector<std::string>& tools) {
  return McpServersGranted(p, tools) > 0;
}

Status StartMcpServers(const Pipeline& p, agent::AgentInvocation& inv,
                       ProcessLauncher& launcher, Clock& clock,
                       const CancelToken& cancel, const EnvLookup& lookup,
                       McpStepServers& servers) {
  const SteadyTime start = clock.Now();
  Deadline deadline;
  if (inv.deadline) {
    deadline = Deadline::At(*inv.deadline);
  } else if (inv.timeout && inv.timeout->count() > 0) {
    deadline = Deadline::At(start + *inv.timeout);
  }
  std::map<const McpServerDef*, std::shared_ptr<McpClient>> started;
  std::vector<std::string> names;
  std::vector<std::shared_ptr<const Tool>> tools;
  for (const std::string& entry : inv.tools) {
    std::optional<McpGrant> grant = p.ParseMcpGrant(entry);
    if (!grant || !grant->server) {
      names.push_back(entry);
      continue;
    }
    std::shared_ptr<McpClient>& client = started[grant->server];
    if (!client) {
      Result<std::shared_ptr<McpClient>> c =
          McpClient::Start(SpecFor(*grant->server, lookup), launcher,
                           inv.working_dir, clock, deadline, cancel);
      if (!c.ok()) return c.status();
      client = *c;
      servers.clients_.push_back(client);
      LogEvent(LogLevel::kDebug, "mcp.started",
               {{"server", grant->server->name},
                {"protocol", client->protocol_version()},
                {"tools", client->tools().size()}});
    }
    auto granted = ToolsOfGrant(*grant, client);
    if (!granted.ok()) return granted.status();
    for (auto& tool : *granted) {
      names.push_back(tool->name());
      tools.push_back(std::move(tool));
    }
  }
  if (Status s = CheckNames(tools, inv); !s.ok()) return s;
  inv.tools = std::move(names);
  for (auto& tool : tools) inv.command_tools.push_back(std::move(tool));
  if (deadline.is_set()) {
    Millis left = deadline.Remaining(clock).value_or(Millis(0));
    if (left <= Millis(0)) {
      return Status(StatusCode::kDeadlineExceeded,
                    "mcp servers: the step's deadline passed while they "
                    "started");
    }
    inv.timeout = left;
  }
  return Status::Ok();
}

}  // namespace steps::pipeline::internal
