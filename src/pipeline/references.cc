// Checks across the whole pipeline: names that must refer to something.
#include <functional>
#include <set>

#include "pipeline/loader_internal.h"

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

}  // namespace

void CheckReferences(const Pipeline& p, Diagnostics& d) {
  std::vector<std::string> agent_names, resource_names;
  for (const AgentEntry& a : p.agents) agent_names.push_back(a.name);
  for (const Resource& r : p.resources) resource_names.push_back(r.name);

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
      if ((s.kind == StepKind::kGet || s.kind == StepKind::kPut) &&
          !s.resource.empty() && !p.FindResource(s.resource)) {
        d.Error(s.line, "unknown resource '" + s.resource +
                            "' — define it under "
                            "'resources:' (" +
                            KnownNames(resource_names) + ")");
      }
      if (s.route_to && !step_names.count(*s.route_to)) {
        d.Error(s.route_to_line, "'to: " + *s.route_to +
                                     "' names no step of job '" + job.name +
                                     "'");
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
