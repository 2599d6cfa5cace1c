#include "pipeline/model.h"

namespace steps::pipeline {

std::string ModelSource::Describe() const {
  return is_cli() ? "cli: " + cli : model;
}

const char* RunnerName(RunnerKind kind) {
  return kind == RunnerKind::kSlurm ? "slurm" : "local";
}

std::string SandboxSpec::Describe() const {
  if (!bwrap()) return "none";
  return network ? "bwrap (network)" : "bwrap (no network)";
}

namespace {

int FirstBwrapLine(const std::vector<StepPtr>& steps) {
  for (const StepPtr& s : steps) {
    if (s->sandbox.has_value() && (*s->sandbox).bwrap()) return s->sandbox.line;
    if (int line = FirstBwrapLine(s->steps)) return line;
    for (HookKind k : kAllHooks) {
      if (!s->hooks.Get(k)) continue;
      if (int line = FirstBwrapLine({s->hooks.Get(k)})) return line;
    }
  }
  return 0;
}

}  // namespace

int Pipeline::FirstBwrapLine() const {
  if (defaults.sandbox.has_value() && (*defaults.sandbox).bwrap())
    return defaults.sandbox.line;
  for (const AgentEntry& a : agents) {
    if (a.sandbox.has_value() && (*a.sandbox).bwrap()) return a.sandbox.line;
  }
  for (const Job& job : jobs) {
    if (int line = pipeline::FirstBwrapLine(job.plan)) return line;
    for (HookKind k : kAllHooks) {
      if (!job.hooks.Get(k)) continue;
      if (int line = pipeline::FirstBwrapLine({job.hooks.Get(k)})) return line;
    }
  }
  return 0;
}

const char* BackoffName(Backoff b) {
  switch (b) {
    case Backoff::kFixed:
      return "fixed";
    case Backoff::kLinear:
      return "linear";
    case Backoff::kExponential:
      return "exponential";
  }
  return "?";
}

const char* StepKindName(StepKind k) {
  switch (k) {
    case StepKind::kTask:
      return "task";
    case StepKind::kGet:
      return "get";
    case StepKind::kPut:
      return "put";
    case StepKind::kAgent:
      return "agent";
    case StepKind::kInParallel:
      return "in_parallel";
    case StepKind::kDo:
      return "do";
    case StepKind::kTry:
      return "try";
    case StepKind::kAcross:
      return "across";
    case StepKind::kGate:
      return "gate";
  }
  return "?";
}

const char* GateDecisionName(GateDecision d) {
  return d == GateDecision::kApprove ? "approve" : "reject";
}

const char* HookKindName(HookKind h) {
  switch (h) {
    case HookKind::kOnSuccess:
      return "on_success";
    case HookKind::kOnFailure:
      return "on_failure";
    case HookKind::kOnError:
      return "on_error";
    case HookKind::kOnAbort:
      return "on_abort";
    case HookKind::kEnsure:
      return "ensure";
  }
  return "?";
}

StepPtr& Hooks::Get(HookKind k) {
  switch (k) {
    case HookKind::kOnSuccess:
      return on_success;
    case HookKind::kOnFailure:
      return on_failure;
    case HookKind::kOnError:
      return on_error;
    case HookKind::kOnAbort:
      return on_abort;
    case HookKind::kEnsure:
      break;
  }
  return ensure;
}

const StepPtr& Hooks::Get(HookKind k) const {
  return const_cast<Hooks*>(this)->Get(k);
}

bool Hooks::empty() const {
  return !on_success && !on_failure && !on_error && !on_abort && !ensure;
}

template <typename T>
static const T* FindByName(const std::vector<T>& v, const std::string& name) {
  for (const T& x : v) {
    if (x.name == name) return &x;
  }
  return nullptr;
}

const AgentEntry* Pipeline::FindAgent(const std::string& name) const {
  return FindByName(agents, name);
}
const ToolDef* Pipeline::FindTool(const std::string& name) const {
  return FindByName(tools, name);
}
const Resource* Pipeline::FindResource(const std::string& name) const {
  return FindByName(resources, name);
}
const ResourceType* Pipeline::FindResourceType(const std::string& name) const {
  return FindByName(resource_types, name);
}
const Job* Pipeline::FindJob(const std::string& name) const {
  return FindByName(jobs, name);
}

}  // namespace steps::pipeline

namespace steps::pipeline {

std::string McpServerDef::CommandText() const {
  if (argv.empty()) return command;
  std::string text;
  for (const std::string& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

const McpServerDef* Pipeline::FindMcpServer(const std::string& name) const {
  return FindByName(mcp_servers, name);
}

std::optional<McpGrant> Pipeline::ParseMcpGrant(
    const std::string& entry, std::string* unknown_server) const {
  if (const McpServerDef* server = FindMcpServer(entry)) {
    return McpGrant{server, "", false};
  }
  if (FindTool(entry)) return std::nullopt;
  McpGrant grant;
  std::string server;
  size_t dot = entry.find('.');
  size_t dunder = entry.find("__");
  if (dot != std::string::npos && dot > 0 && dot + 1 < entry.size()) {
    server = entry.substr(0, dot);
    grant.tool = entry.substr(dot + 1);
  } else if (dunder != std::string::npos && dunder > 0 &&
             dunder + 2 < entry.size()) {
    server = entry.substr(0, dunder);
    grant.tool = entry;
    grant.by_exposed_name = true;
  } else {
    return std::nullopt;
  }
  grant.server = FindMcpServer(server);
  if (grant.server == nullptr && unknown_server) *unknown_server = server;
  return grant;
}

}  // namespace steps::pipeline
