#include "pipeline/resolve.h"

#include <algorithm>

#include "core/hash.h"
#include "core/json_text.h"
#include "pipeline/retry_schedule.h"

namespace steps::pipeline {
namespace {

// 0 written means "no limit" for these dials.
template <typename T>
std::optional<T> ZeroIsNone(T v) {
  if (v == T{}) return std::nullopt;
  return v;
}

// First written of step, then entry; else the default.
template <typename T, typename Out>
Dial<Out> Pick(const Written<T>& step, const Written<T>* entry, Out fallback,
               Out (*convert)(T)) {
  if (step.has_value()) return {convert(*step), DialOrigin::kStep, step.line};
  if (entry && entry->has_value())
    return {convert(**entry), DialOrigin::kAgentEntry, entry->line};
  return {fallback, DialOrigin::kPackageDefault, 0};
}

std::optional<Millis> DurationOrNone(Millis v) { return ZeroIsNone(v); }
std::optional<int64_t> CapOrNone(int64_t v) { return ZeroIsNone(v); }
int Same(int v) { return v; }

ResolvedDials ResolveAgentDials(const Step* step, const AgentEntry& entry,
                                const ModelSource& source) {
  static const Step kNoStep;
  const Step& s = step ? *step : kNoStep;
  ResolvedDials d;
  d.timeout = Pick<Millis, std::optional<Millis>>(
      s.timeout, &entry.timeout, kDefaultAgentTimeout, DurationOrNone);
  d.attempts =
      Pick<int, int>(s.attempts, &entry.attempts, kDefaultAgentAttempts, Same);
  std::optional<int64_t> turns_default;
  if (!source.is_cli()) turns_default = kDefaultHostedMaxTurns;
  d.max_turns = Pick<int64_t, std::optional<int64_t>>(
      s.max_turns, &entry.max_turns, turns_default, CapOrNone);
  d.max_context_bytes = Pick<int64_t, std::optional<int64_t>>(
      s.max_context_bytes, &entry.max_context_bytes, kDefaultMaxContextBytes,
      CapOrNone);
  d.llm_timeout = Pick<Millis, std::optional<Millis>>(
      s.llm_timeout, &entry.llm_timeout, std::nullopt, DurationOrNone);
  d.tool_timeout = Pick<Millis, std::optional<Millis>>(
      s.tool_timeout, &entry.tool_timeout, kDefaultToolTimeout, DurationOrNone);
  if (s.budget) {
    d.budget = {s.budget, DialOrigin::kStep, s.budget->line};
  } else if (entry.budget) {
    d.budget = {entry.budget, DialOrigin::kAgentEntry, entry.budget->line};
  }
  return d;
}

ResolvedDials ResolveWorkDials(const Step& s) {
  ResolvedDials d;
  if (s.timeout.has_value())
    d.timeout = {*s.timeout, DialOrigin::kStep, s.timeout.line};
  d.attempts = {kDefaultTaskAttempts, DialOrigin::kPackageDefault, 0};
  if (s.attempts.has_value()) {
    d.attempts = {*s.attempts, DialOrigin::kStep, s.attempts.line};
  } else if (s.retry && s.retry->max_attempts.has_value()) {
    d.attempts = {*s.retry->max_attempts, DialOrigin::kRetryBlock,
                  s.retry->max_attempts.line};
  }
  return d;
}

// First written of step, agent entry and defaults:; else no sandbox.
Dial<SandboxSpec> ResolveSandbox(const Written<SandboxSpec>* step,
                                 const Written<SandboxSpec>* entry,
                                 const Defaults& defaults) {
  if (step && step->has_value()) return {**step, DialOrigin::kStep, step->line};
  if (entry && entry->has_value())
    return {**entry, DialOrigin::kAgentEntry, entry->line};
  if (defaults.sandbox.has_value())
    return {*defaults.sandbox, DialOrigin::kDefaults, defaults.sandbox.line};
  return {SandboxSpec{}, DialOrigin::kPackageDefault, 0};
}

// The agent entry's, then defaults:'s; else off.
template <typename T>
Dial<std::optional<T>> ResolveGuard(const Written<T>& entry,
                                    const Written<T>& defaults) {
  if (entry.has_value()) return {*entry, DialOrigin::kAgentEntry, entry.line};
  if (defaults.has_value())
    return {*defaults, DialOrigin::kDefaults, defaults.line};
  return {std::nullopt, DialOrigin::kPackageDefault, 0};
}

void ResolveGuards(ResolvedDials& d, const AgentEntry& entry,
                   const Defaults& defaults) {
  d.retry_budget = ResolveGuard(entry.retry_budget, defaults.retry_budget);
  d.circuit = ResolveGuard(entry.circuit, defaults.circuit);
}

const ModelSource& SourceOf(const Pipeline& p, const AgentEntry& a) {
  static const ModelSource kNone;
  if (a.source) return *a.source;
  if (p.defaults.source) return *p.defaults.source;
  return kNone;
}

// Every source of the chain, as what decides its answers: the model or CLI
// command, the endpoint, a CLI's environment as written, and the model
// parameters it is sent with (only those set, so a source with none keeps
// the key it had before parameters existed).
void AddSource(FieldHasher& h, const std::string& field, const ModelSource& s,
               const ModelParameters& entry_params) {
  h.Add(field, s.is_cli() ? "cli:" + s.cli : "model:" + s.model);
  h.Add(field + ".base_url", s.base_url.value_or(""));
  for (const auto& [k, v] : s.env) h.Add(field + ".env." + k, v);
  for (const auto& [k, v] : s.headers) h.Add(field + ".headers." + k, v);
  if (s.is_cli()) return;
  const ModelParameters p = s.params.Over(entry_params);
  auto number = [](double v) { return nlohmann::json(v).dump(); };
  if (p.temperature) h.Add(field + ".temperature", number(*p.temperature));
  if (p.top_p) h.Add(field + ".top_p", number(*p.top_p));
  if (p.seed) h.Add(field + ".seed", std::to_string(*p.seed));
  if (p.max_output_tokens)
    h.Add(field + ".max_output_tokens", std::to_string(*p.max_output_tokens));
  for (const std::string& stop : p.stop) h.Add(field + ".stop", stop);
  if (p.json_schema) h.Add(field + ".response_format", *p.json_schema);
}

// A sandbox changes what a command can see and reach, so what it produces:
// part of the identity when on. Off adds nothing, keeping earlier keys.
void AddSandbox(FieldHasher& h, const SandboxSpec& sandbox) {
  if (sandbox.bwrap()) h.Add("sandbox", sandbox.Describe());
}

// A command tool an agent grants: everything that decides what it does.
void AddToolDef(FieldHasher& h, const ToolDef& t) {
  h.Add("tool.description", t.description)
      .Add("tool.parameters", DumpJson(t.parameters))
      .Add("tool.run", t.run);
  if (t.timeout.has_value()) {
    h.Add("tool.timeout", std::to_string((*t.timeout).count()));
  } else {
    h.AddAbsent("tool.timeout");
  }
  for (const auto& [k, v] : t.env) h.Add("tool.env." + k, v);
}

// An MCP server an agent grants (a tool of): what decides what its tools
// do. Its startup_timeout only bounds the start, so it is left out.
void AddMcpServer(FieldHasher& h, const McpServerDef& s) {
  h.Add("mcp.name", s.name);
  for (const std::string& a : s.argv) h.Add("mcp.argv", a);
  if (s.argv.empty()) h.Add("mcp.command", s.command);
  if (!s.url.empty()) {
    h.Add("mcp.url", s.url);
    // As written: a `${NAME}` reference, not the secret it names.
    for (const auto& [k, v] : s.headers) h.Add("mcp.header." + k, v);
  }
  for (const auto& [k, v] : s.env) h.Add("mcp.env." + k, v);
  if (s.tool_timeout.has_value()) {
    h.Add("mcp.tool_timeout", std::to_string((*s.tool_timeout).count()));
  } else {
    h.AddAbsent("mcp.tool_timeout");
  }
}

}  // namespace

const char* DialOriginName(DialOrigin o) {
  switch (o) {
    case DialOrigin::kStep:
      return "step";
    case DialOrigin::kRetryBlock:
      return "retry block";
    case DialOrigin::kFix:
      return "fix";
    case DialOrigin::kAgentEntry:
      return "agent entry";
    case DialOrigin::kJob:
      return "job";
    case DialOrigin::kCommandLine:
      return "command line";
    case DialOrigin::kDefaults:
      return "defaults";
    case DialOrigin::kPackageDefault:
      return "default";
  }
  return "?";
}

std::string IdentityHash(const Pipeline& p, const Step& s,
                         const ResolvedDials& dials) {
  FieldHasher h;
  h.Add("kind", StepKindName(s.kind));
  switch (s.kind) {
    case StepKind::kTask: {
      h.Add("run", s.run);
      for (const auto& [k, v] : s.env) h.Add("env." + k, v);
      for (const std::string& in : s.inputs) h.Add("input", in);
      for (const std::string& out : s.outputs) h.Add("output", out);
      AddSandbox(h, dials.sandbox.value);
      break;
    }
    case StepKind::kGet:
    case StepKind::kPut: {
      h.Add("resource", s.resource);
      if (const Resource* r = p.FindResource(s.resource)) {
        h.Add("source", DumpJson(r->source));
        if (const ResourceType* t = p.FindResourceType(r->type)) {
          h.Add("type", t->name)
              .Add("check", t->check)
              .Add("in", t->in)
              .Add("out", t->out);
        }
      }
      h.Add("params", DumpJson(s.params));
      AddSandbox(h, dials.sandbox.value);
      break;
    }
    case StepKind::kAgent: {
      const AgentEntry* a = p.FindAgent(s.agent);
      if (a) {
        AddSource(h, "source", SourceOf(p, *a), a->params);
        for (const ModelSource& f : a->fallback)
          AddSource(h, "fallback", f, a->params);
        h.Add("persona", a->persona);
        std::vector<std::string> tools = a->tools;
        std::sort(tools.begin(), tools.end());
        for (const std::string& t : tools) {
          h.Add("tool", t);
          // A changed command tool must not serve a cached answer.
          if (const ToolDef* def = p.FindTool(t)) AddToolDef(h, *def);
          // So must a changed MCP server.
          if (auto g = p.ParseMcpGrant(t); g && g->server) {
            AddMcpServer(h, *g->server);
          }
        }
        h.Add("required_tools", a->required_tools ? "yes" : "no");
      }
      for (const std::string& m : s.messages) h.Add("message", m);
      for (const std::string& c : s.context_paths) h.Add("context_path", c);
      if (dials.max_turns.value) {
        h.Add("max_turns", std::to_string(*dials.max_turns.value));
      } else {
        h.AddAbsent("max_turns");
      }
      AddSandbox(h, dials.sandbox.value);
      break;
    }
    default:
      return "";
  }
  return h.HexDigest();
}

ResolvedPlan::ResolvedPlan(std::shared_ptr<const Pipeline> pipeline,
                           PlanOptions options)
    : pipeline_(std::move(pipeline)), options_(options) {
  for (const Job& job : pipeline_->jobs) {
    ResolveAll(job.plan, job);
    for (HookKind k : kAllHooks) {
      if (job.hooks.Get(k)) ResolveAll({job.hooks.Get(k)}, job);
    }
  }
}

namespace {

// The first of step, job and defaults: that wrote the key.
template <typename T, typename Field>
std::optional<Dial<T>> FirstWritten(const SlurmSpec& step, const SlurmSpec& job,
                                    const SlurmSpec& defaults, Field field) {
  if ((step.*field).has_value())
    return Dial<T>{*(step.*field), DialOrigin::kStep, (step.*field).line};
  if ((job.*field).has_value())
    return Dial<T>{*(job.*field), DialOrigin::kJob, (job.*field).line};
  if ((defaults.*field).has_value()) {
    return Dial<T>{*(defaults.*field), DialOrigin::kDefaults,
                   (defaults.*field).line};
  }
  return std::nullopt;
}

}  // namespace

void ResolvedPlan::ResolveRunner(const Step& s, const Job& job,
                                 ResolvedDials& d) const {
  const Defaults& def = pipeline_->defaults;
  if (options_.runner) {
    d.runner = {*options_.runner, DialOrigin::kCommandLine, 0};
  } else if (s.runner.has_value()) {
    d.runner = {*s.runner, DialOrigin::kStep, s.runner.line};
  } else if (job.runner.has_value()) {
    d.runner = {*job.runner, DialOrigin::kJob, job.runner.line};
  } else if (def.runner.has_value()) {
    d.runner = {*def.runner, DialOrigin::kDefaults, def.runner.line};
  }
  auto text = [&](Written<std::string> SlurmSpec::*field, std::string& out) {
    if (auto v =
            FirstWritten<std::string>(s.slurm, job.slurm, def.slurm, field))
      out = v->value;
  };
  ClusterPlacement& p = d.slurm;
  text(&SlurmSpec::partition, p.partition);
  text(&SlurmSpec::account, p.account);
  text(&SlurmSpec::qos, p.qos);
  text(&SlurmSpec::mem, p.mem);
  text(&SlurmSpec::gres, p.gres);
  if (auto v =
          FirstWritten<int>(s.slurm, job.slurm, def.slurm, &SlurmSpec::cpus))
    p.cpus = v->value;
  if (auto v = FirstWritten<std::vector<std::string>>(
          s.slurm, job.slurm, def.slurm, &SlurmSpec::extra))
    p.extra = v->value;
  if (auto v = FirstWritten<bool>(s.slurm, job.slurm, def.slurm,
                                  &SlurmSpec::timeout_includes_queue))
    d.timeout_includes_queue = *v;
  if (auto v = FirstWritten<bool>(s.slurm, job.slurm, def.slurm,
                                  &SlurmSpec::retry_lost))
    d.retry_lost = *v;
}

void ResolvedPlan::ResolveAll(const std::vector<StepPtr>& steps,
                              const Job& job) {
  for (const StepPtr& sp : steps) {
    const Step& s = *sp;
    ResolvedStep r;
    r.step = &s;
    if (s.kind == StepKind::kAgent) {
      r.agent = pipeline_->FindAgent(s.agent);
      if (r.agent) {
        r.source = SourceOf(*pipeline_, *r.agent);
        r.dials = ResolveAgentDials(&s, *r.agent, r.source);
        r.dials.sandbox =
            ResolveSandbox(&s.sandbox, &r.agent->sandbox, pipeline_->defaults);
        ResolveGuards(r.dials, *r.agent, pipeline_->defaults);
      }
    } else if (s.kind == StepKind::kAcross) {
      // An across block's cells run on Slurm only where the block says so
      // (its placement from the block, the job, defaults:); `--runner
      // local` keeps them here, `--runner slurm` does not send them.
      if (s.runner.has_value()) {
        ResolveRunner(s, job, r.dials);
        if (options_.runner != RunnerKind::kLocal)
          r.dials.runner = {*s.runner, DialOrigin::kStep, s.runner.line};
      }
    } else if (!s.is_container()) {
      r.dials = ResolveWorkDials(s);
      r.dials.sandbox =
          ResolveSandbox(&s.sandbox, nullptr, pipeline_->defaults);
      if (s.kind != StepKind::kGate) ResolveRunner(s, job, r.dials);
      if (s.retry) {
        r.retry_waits = RetryWaits(*s.retry, r.dials.attempts.value);
        if (s.retry->total_timeout.has_value())
          r.total_timeout = *s.retry->total_timeout;
      }
    }
    if (s.fix) {
      r.fix_agent = pipeline_->FindAgent(s.fix->agent);
      if (r.fix_agent) {
        ResolvedDials fd = ResolveAgentDials(
            nullptr, *r.fix_agent, SourceOf(*pipeline_, *r.fix_agent));
        // fix: {attempts}, then the agent entry's (already in fd, as its
        // timeout is), then 1 rather than an agent step's default of 3.
        if (s.fix->attempts.has_value()) {
          fd.attempts = {*s.fix->attempts, DialOrigin::kFix,
                         s.fix->attempts.line};
        } else if (!r.fix_agent->attempts.has_value()) {
          fd.attempts = {kDefaultFixAttempts, DialOrigin::kPackageDefault, 0};
        }
        // The fixer works in the task's directory: the task's own sandbox
        // comes first.
        fd.sandbox = ResolveSandbox(&s.sandbox, &r.fix_agent->sandbox,
                                    pipeline_->defaults);
        ResolveGuards(fd, *r.fix_agent, pipeline_->defaults);
        r.fix_dials = fd;
      }
    }
    if (s.check && s.check->judge) {
      r.judge_agent = pipeline_->FindAgent(s.check->judge->agent);
      if (r.judge_agent) {
        r.judge_source = SourceOf(*pipeline_, *r.judge_agent);
        ResolvedDials jd =
            ResolveAgentDials(nullptr, *r.judge_agent, *r.judge_source);
        jd.sandbox =
            ResolveSandbox(nullptr, &r.judge_agent->sandbox, pipeline_->defaults);
        ResolveGuards(jd, *r.judge_agent, pipeline_->defaults);
        r.judge_dials = jd;
      }
    }
    r.identity = IdentityHash(*pipeline_, s, r.dials);
    steps_.emplace(&s, std::move(r));
    ResolveAll(s.steps, job);
    for (HookKind k : kAllHooks) {
      if (s.hooks.Get(k)) ResolveAll({s.hooks.Get(k)}, job);
    }
  }
}

const ResolvedStep& ResolvedPlan::For(const Step& step) const {
  return steps_.at(&step);
}

}  // namespace steps::pipeline
