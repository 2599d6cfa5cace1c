#include "pipeline/source_check.h"

#include <algorithm>
#include <functional>
#include <set>

#include "providers/registry.h"

namespace steps::pipeline {
namespace {

void ForEachStep(const std::vector<StepPtr>& steps,
                 const std::function<void(const Step&)>& fn) {
  for (const StepPtr& s : steps) {
    if (!s) continue;
    fn(*s);
    ForEachStep(s->steps, fn);
    for (HookKind k : kAllHooks) {
      if (const StepPtr& h = s->hooks.Get(k)) ForEachStep({h}, fn);
    }
  }
}

// The entry's source (else the defaults'), then its fallbacks.
std::vector<const ModelSource*> SourcesOf(const Pipeline& p,
                                          const AgentEntry& a) {
  std::vector<const ModelSource*> out;
  if (a.source) {
    out.push_back(&*a.source);
  } else if (p.defaults.source) {
    out.push_back(&*p.defaults.source);
  }
  for (const ModelSource& f : a.fallback) out.push_back(&f);
  return out;
}

// The agent entries the jobs' agent steps, fixers and judges name.
std::vector<const AgentEntry*> AgentsUsed(
    const Pipeline& p, const std::vector<std::string>& jobs) {
  std::set<std::string> names;
  for (const Job& job : p.jobs) {
    if (!jobs.empty() &&
        std::find(jobs.begin(), jobs.end(), job.name) == jobs.end())
      continue;
    std::vector<StepPtr> all = job.plan;
    for (HookKind k : kAllHooks) {
      if (job.hooks.Get(k)) all.push_back(job.hooks.Get(k));
    }
    ForEachStep(all, [&](const Step& s) {
      if (s.kind == StepKind::kAgent) names.insert(s.agent);
      if (s.fix) names.insert(s.fix->agent);
      if (s.check && s.check->judge) names.insert(s.check->judge->agent);
    });
  }
  std::vector<const AgentEntry*> out;
  for (const AgentEntry& a : p.agents) {
    if (names.count(a.name)) out.push_back(&a);
  }
  return out;
}

std::string CheckCliSource(const ModelSource& s, const EnvLookup& lookup) {
  std::vector<std::string> unset;
  ExpandEnv(s.env, lookup, &unset);
  if (unset.empty()) return "";
  std::string names;
  for (const std::string& n : unset) names += (names.empty() ? "" : ", ") + n;
  return "source 'cli: " + s.cli + "': its env: refers to " + names +
         ", which " + (unset.size() == 1 ? "is" : "are") +
         " not set — export " + (unset.size() == 1 ? "it" : "them") +
         " before the run";
}

std::string CheckHostedSource(const ModelSource& s, const EnvLookup& lookup) {
  if (s.model.rfind("mock/", 0) == 0) {
    return "model '" + s.model +
           "' is served only from a mock: block — run with steps test or "
           "steps run --mock";
  }
  static const ProviderRegistry* registry = [] {
    auto* r = new ProviderRegistry();  // Never destroyed: no exit races.
    RegisterBuiltinProviders(*r);
    return r;
  }();
  SourceSpec spec;
  spec.model = s.model;
  spec.base_url = s.base_url.value_or("");
  spec.api_key_env = s.api_key_env.value_or("");
  spec.stream = s.stream;
  ProviderEnvironment env;
  env.getenv = lookup;
  Result<ResolvedSource> made = registry->Create(spec, env);
  if (made.ok()) return "";
  std::string message = made.status().message();
  if (message.find("is not set") != std::string::npos) {
    message +=
        " — export it before the run (api_key_env: names another "
        "variable that holds the key)";
  }
  return message;
}

}  // namespace

std::vector<SourceProblem> CheckSourceEnvironment(
    const ResolvedPlan& plan, const std::vector<std::string>& jobs,
    const EnvLookup& lookup) {
  const Pipeline& p = plan.pipeline();
  std::vector<SourceProblem> problems;
  std::set<const ModelSource*> seen;
  for (const AgentEntry* a : AgentsUsed(p, jobs)) {
    for (const ModelSource* s : SourcesOf(p, *a)) {
      if (!seen.insert(s).second) continue;
      std::string why = s->is_cli() ? CheckCliSource(*s, lookup)
                                    : CheckHostedSource(*s, lookup);
      if (!why.empty()) problems.push_back({s->line, why});
    }
  }
  std::stable_sort(problems.begin(), problems.end(),
                   [](const SourceProblem& a, const SourceProblem& b) {
                     return a.line < b.line;
                   });
  return problems;
}

}  // namespace steps::pipeline
