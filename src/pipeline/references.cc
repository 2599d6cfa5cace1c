// Checks across the whole pipeline: names that must refer to something.
#include <functional>
#include <memory>
#include <set>

#include "pipeline/loader_internal.h"
#include "providers/registry.h"
#include "tools/registry.h"

namespace steps::pipeline::internal {
namespace {

void ForEachStep(const std::vector<StepPtr>& steps,
                 const std::function<void(const Step&)>& fn);

void ForEachInStep(const Step& s, const std::function<void(const Step&)>& fn) {
  fn(s);
  ForEachStep(s.steps, fn);
  for (HookKind k : kAllHooks) {
    if (const StepPtr& h = s.hooks.Get(k)) ForEachInStep(*h, fn);
  }
}

void ForEachStep(const std::vector<StepPtr>& steps,
                 const std::function<void(const Step&)>& fn) {
  for (const StepPtr& s : steps) {
    if (s) ForEachInStep(*s, fn);
  }
}

std::string KnownNames(const std::vector<std::string>& names) {
  if (names.empty()) return "none are defined";
  std::string out = "known: ";
  for (size_t i = 0; i < names.size() && i < 8; ++i)
    out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += ", ...";
  return out;
}

// The provider prefixes a source may name: the built-in adapters and
// `mock` (served from a mock: script).
const ProviderRegistry& KnownProviders() {
  static const ProviderRegistry* registry = [] {
    auto* r = new ProviderRegistry();  // Never destroyed: no exit races.
    RegisterBuiltinProviders(*r);
    r->Register("mock", nullptr);
    return r;
  }();
  return *registry;
}

void CheckSourceProvider(const ModelSource& s, Diagnostics& d) {
  if (s.is_cli()) return;
  const std::string provider = s.model.substr(0, s.model.find('/'));
  if (provider.empty() || KnownProviders().Has(provider)) return;
  d.Error(s.line, "model '" + s.model + "' names unknown provider '" +
                      provider +
                      "' — write PROVIDER/MODEL with a known "
                      "provider (" +
                      KnownNames(KnownProviders().Names()) +
                      "; for another OpenAI-compatible server, openai/MODEL "
                      "with base_url)");
}

// Each source of `a` can honour the model parameters it gets (its own over
// the entry's): a CLI source takes none, and a provider only those it has.
void CheckModelParameters(const Pipeline& p, const AgentEntry& a,
                          Diagnostics& d) {
  std::vector<const ModelSource*> sources;
  if (a.source) {
    sources.push_back(&*a.source);
  } else if (p.defaults.source) {
    sources.push_back(&*p.defaults.source);
  }
  for (const ModelSource& f : a.fallback) sources.push_back(&f);
  for (const ModelSource* s : sources) {
    const ModelParameters params = s->params.Over(a.params);
    if (s->is_cli()) {
      if (!a.params.empty()) {
        d.Error(a.params_line,
                "agent '" + a.name + "' sets '" + a.params.SetKeys().front() +
                    "', but its source 'cli: " + s->cli +
                    "' takes no model parameters — set them on its hosted "
                    "sources instead");
      }
      continue;
    }
    const std::string provider = s->model.substr(0, s->model.find('/'));
    // Providers without an adapter (`mock`) take every parameter.
    const std::shared_ptr<const Adapter> adapter =
        KnownProviders().FindAdapter(provider);
    if (adapter == nullptr) continue;
    for (const std::string& key :
         UnhonouredParameters(adapter->info(), params)) {
      const bool own =
          !UnhonouredParameters(adapter->info(), s->params).empty();
      d.Error(own ? s->line : a.params_line,
              "'" + key + "' cannot be honoured by provider '" + provider +
                  "' (source '" + s->model + "' of agent '" + a.name +
                  "') — remove it, or set it only on sources whose "
                  "provider has it");
    }
  }
}

// Tools an agent entry grants must exist (built-in or under `tools:`);
// providers its sources name too.
void CheckAgentEntries(const Pipeline& p, Diagnostics& d) {
  if (p.defaults.source) CheckSourceProvider(*p.defaults.source, d);
  const ToolRegistry& tools = ToolRegistry::BuiltIn();
  for (const AgentEntry& a : p.agents) {
    if (a.source) CheckSourceProvider(*a.source, d);
    for (const ModelSource& f : a.fallback) CheckSourceProvider(f, d);
    CheckModelParameters(p, a, d);
    for (const std::string& t : a.tools) {
      if (tools.Find(t) || p.FindTool(t)) continue;
      std::string unknown_server;
      if (std::optional<McpGrant> g = p.ParseMcpGrant(t, &unknown_server)) {
        if (g->server) continue;
        std::vector<std::string> servers;
        for (const McpServerDef& s : p.mcp_servers) servers.push_back(s.name);
        d.Error(a.tools_line ? a.tools_line : a.line,
                "agent '" + a.name + "' grants tool '" + t +
                    "' of unknown mcp server '" + unknown_server +
                    "' — declare it under the top-level 'mcp_servers:' (" +
                    KnownNames(servers) + ")");
        continue;
      }
      std::vector<std::string> known = tools.Names();
      for (const ToolDef& def : p.tools) known.push_back(def.name);
      for (const McpServerDef& s : p.mcp_servers) known.push_back(s.name);
      d.Error(
          a.tools_line ? a.tools_line : a.line,
          "agent '" + a.name + "' grants unknown tool '" + t +
              "' — remove it, use a known tool (" + KnownNames(known) +
              ") or declare it under the top-level 'tools:' or 'mcp_servers:'");
    }
  }
}

// `to:` routes within the list of steps it stands in (a plan, a do, a try,
// an across cell), and only backwards: to the step itself or one before it.
// A forward target would skip the steps in between and hide the failure; a
// step of another list, a hook or an in_parallel branch is never routed.
struct RouteContext {
  const std::string& job;
  const std::set<std::string>& step_names;  // Every step of the job.
  Diagnostics& d;
};

void CheckRoutes(const std::vector<StepPtr>& seq, bool routable,
                 const RouteContext& c);

void CheckRoutesIn(const Step& s, const RouteContext& c) {
  bool sequence = s.kind == StepKind::kDo || s.kind == StepKind::kTry ||
                  s.kind == StepKind::kAcross;
  CheckRoutes(s.steps, sequence, c);
  for (HookKind k : kAllHooks) {
    if (const StepPtr& h = s.hooks.Get(k)) CheckRoutes({h}, false, c);
  }
}

void CheckRoutes(const std::vector<StepPtr>& seq, bool routable,
                 const RouteContext& c) {
  Diagnostics& d = c.d;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (!seq[i]) continue;
    const Step& s = *seq[i];
    CheckRoutesIn(s, c);
    if (!s.route_to) continue;
    StepScope scope(d, s.line);
    if (!c.step_names.count(*s.route_to)) {
      d.Error(s.route_to_line,
              "'to: " + *s.route_to + "' names no step of job '" + c.job + "'");
      continue;
    }
    if (!routable) {
      d.Error(s.route_to_line,
              "'to: " + *s.route_to + "' on '" + s.name +
                  "' would never route: a hook or an in_parallel branch "
                  "is not part of a sequence of steps — put it on a step "
                  "of a plan, do, try or across");
      continue;
    }
    // The executor routes to the last step of the list with that name.
    size_t target = seq.size();
    for (size_t j = 0; j < seq.size(); ++j) {
      if (seq[j] && seq[j]->name == *s.route_to) target = j;
    }
    if (target <= i) continue;
    if (target < seq.size()) {
      d.Error(s.route_to_line,
              "'to: " + *s.route_to + "' routes forward: '" + *s.route_to +
                  "' comes after '" + s.name +
                  "', so routing would skip the steps between and hide "
                  "the failure — route to an earlier step (or drop 'to:' "
                  "and let the failure fail the job)");
    } else {
      d.Error(s.route_to_line,
              "'to: " + *s.route_to +
                  "' names no earlier step in the list "
                  "that holds '" +
                  s.name + "' (job '" + c.job +
                  "'): routing goes back within one plan, do, try or "
                  "across");
    }
  }
}

}  // namespace

void CheckReferences(const Pipeline& p, Diagnostics& d) {
  std::vector<std::string> agent_names, resource_names;
  for (const AgentEntry& a : p.agents) agent_names.push_back(a.name);
  for (const Resource& r : p.resources) resource_names.push_back(r.name);
  CheckAgentEntries(p, d);

  for (const Job& job : p.jobs) {
    std::set<std::string> step_names, produced;
    std::vector<StepPtr> all = job.plan;
    for (HookKind k : kAllHooks) {
      if (job.hooks.Get(k)) all.push_back(job.hooks.Get(k));
    }
    ForEachStep(all, [&](const Step& s) {
      step_names.insert(s.name);
      if (s.kind == StepKind::kGet) produced.insert(s.name);
      for (const std::string& o : s.outputs) produced.insert(o);
    });
    ForEachStep(all, [&](const Step& s) {
      StepScope scope(d, s.line);
      if (s.kind == StepKind::kAgent && !s.agent.empty() &&
          !p.FindAgent(s.agent)) {
        d.Error(s.line, "unknown agent '" + s.agent +
                            "' — define it under 'agents:' (" +
                            KnownNames(agent_names) + ")");
      }
      if (s.fix && !p.FindAgent(s.fix->agent)) {
        d.Error(s.fix->line, "'fix' names unknown agent '" + s.fix->agent +
                                 "' — define it under 'agents:' (" +
                                 KnownNames(agent_names) + ")");
      }
      if (s.check && s.check->judge && !p.FindAgent(s.check->judge->agent)) {
        d.Error(s.check->judge->line,
                "'assert.judge' names unknown agent '" +
                    s.check->judge->agent + "' — define it under 'agents:' (" +
                    KnownNames(agent_names) + ")");
      }
      if ((s.kind == StepKind::kGet || s.kind == StepKind::kPut) &&
          !s.resource.empty() && !p.FindResource(s.resource)) {
        d.Error(s.line, "unknown resource '" + s.resource +
                            "' — define it under "
                            "'resources:' (" +
                            KnownNames(resource_names) + ")");
      }
      for (const std::string& in : s.inputs) {
        if (!produced.count(in)) {
          d.Error(s.line,
                  "input '" + in + "' is produced by no step of job '" +
                      job.name +
                      "' (a get of that resource, or a task's 'outputs')");
        }
      }
    });
    std::vector<StepPtr> hooks;
    for (HookKind k : kAllHooks) {
      if (job.hooks.Get(k)) hooks.push_back(job.hooks.Get(k));
    }
    const RouteContext routes{job.name, step_names, d};
    CheckRoutes(job.plan, true, routes);
    for (const StepPtr& h : hooks) CheckRoutes({h}, false, routes);
    if (job.check && job.check->execution) {
      for (const std::string& name : *job.check->execution) {
        if (!step_names.count(name) && !p.FindAgent(name)) {
          d.Warn(job.check->line,
                 "'assert.execution' names '" + name +
                     "', which is no step, hook or fix agent of job '" +
                     job.name + "' — the assert can never hold");
        }
      }
    }
  }
}

}  // namespace steps::pipeline::internal
