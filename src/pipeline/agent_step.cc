// Agent steps and fixers: a resolved step becomes an AgentInvocation for the
// agent runner; its result becomes the step's record.
#include <algorithm>
#include <filesystem>

#include "core/log.h"
#include "pipeline/executor_internal.h"
#include "pipeline/mcp_step.h"
#include "pipeline/spans.h"
#include "pipeline/template.h"
#include "process/limits.h"
#include "process/local_launcher.h"
#include "tools/command_tool.h"

namespace steps::pipeline::internal {

namespace fs = std::filesystem;

namespace {

// `lookup` expands the `${NAME}` references of a CLI source's `env:`;
// `entry_params` fill the parameters the source leaves unset.
agent::AgentSource ToAgentSource(const ModelSource& s,
                                 const ModelParameters& entry_params,
                                 const EnvLookup& lookup) {
  agent::AgentSource out;
  if (!s.is_cli()) out.params = s.params.Over(entry_params);
  out.env = ExpandEnv(s.env, lookup);
  out.headers = ExpandEnv(s.headers, lookup);
  out.model = s.model;
  out.cli = s.cli;
  out.base_url = s.base_url;
  out.api_key_env = s.api_key_env;
  if (s.price)
    out.price =
        agent::SourcePrice{s.price->input_per_mtok, s.price->output_per_mtok};
  out.stream = s.stream;
  out.rate_limit = s.rate_limit;
  return out;
}

// The pipeline's command tools the entry grants, their `env:` expanded.
std::vector<std::shared_ptr<const Tool>> CommandToolsFor(
    const Pipeline& p, const AgentEntry& entry, const EnvLookup& lookup) {
  std::vector<std::shared_ptr<const Tool>> tools;
  for (const std::string& name : entry.tools) {
    const ToolDef* def = p.FindTool(name);
    if (def == nullptr) continue;
    CommandToolSpec spec;
    spec.name = def->name;
    spec.description = def->description;
    spec.parameters = def->parameters;
    spec.run = def->run;
    spec.timeout = def->timeout.value;
    spec.env = ExpandEnv(def->env, lookup);
    tools.push_back(std::make_shared<CommandTool>(std::move(spec)));
  }
  return tools;
}

agent::AgentInvocation MakeInvocation(const Pipeline& p,
                                      const AgentEntry& entry,
                                      const ModelSource& primary,
                                      const ResolvedDials& d,
                                      const std::string& step_name,
                                      const EnvLookup& lookup) {
  agent::AgentInvocation inv;
  inv.agent_name = entry.name;
  inv.step_name = step_name;
  inv.sources.push_back(ToAgentSource(primary, entry.params, lookup));
  for (const ModelSource& f : entry.fallback)
    inv.sources.push_back(ToAgentSource(f, entry.params, lookup));
  inv.persona = entry.persona;
  inv.tools = entry.tools;
  inv.command_tools = CommandToolsFor(p, entry, lookup);
  inv.required_tools = entry.required_tools;
  inv.timeout = d.timeout.value;
  inv.attempts = d.attempts.value;
  inv.max_turns = d.max_turns.value;
  inv.max_context_bytes = d.max_context_bytes.value;
  inv.llm_timeout = d.llm_timeout.value;
  inv.tool_timeout = d.tool_timeout.value;
  if (d.budget.value)
    inv.budget =
        agent::BudgetLimit{d.budget.value->tokens, d.budget.value->usd};
  inv.sandbox = ToSandboxOptions(d.sandbox.value);
  inv.retry_budget = d.retry_budget.value;
  inv.circuit = d.circuit.value;
  return inv;
}

}  // namespace

StepResult JobRunner::RunAgent(const Step& step, const Scope& scope,
                               const StepRef& ref, StepRecord& record,
                               SteadyTime step_start) {
  const ResolvedStep& rs = ex_.plan.For(step);
  // A resumed step: the time it already spent is off its timeout.
  std::optional<Millis> timeout = rs.dials.timeout.value;
  const ResumeState* resume = ex_.opts.resume;
  if (resume && timeout && timeout->count() > 0) {
    if (auto it = resume->step_spent.find(ref.id);
        it != resume->step_spent.end())
      timeout = std::max(*timeout - it->second, Millis(1));
  }
  // The step's one deadline runs from its start (`step_start`, which a
  // resumed step moved back by the time it already spent): what came
  // before the conversation (the cache lookup) counts against it, and the
  // records show exactly `timeout` from the step's start to its deadline.
  std::optional<SteadyTime> deadline;
  if (timeout && timeout->count() > 0) {
    deadline = std::max(step_start + *rs.dials.timeout.value,
                        clock_.Now() + Millis(1));
  }
  ex_.observer().OnStepStart(ref, deadline);
  ex_.observer().OnAttemptStart(ref, 1, 1, deadline);
  AttemptRecord attempt;
  attempt.started = clock_.WallNow();
  const SteadyTime start = clock_.Now();

  auto finish = [&](StepResult r) {
    attempt.outcome = r.outcome;
    attempt.error = r.error;
    attempt.output = r.output;
    attempt.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
    attempt.identity = record.identity;
    ex_.observer().OnAttemptEnd(ref, attempt);
    record.attempts.push_back(attempt);
    if (r.outcome == Outcome::kErrored) r.caused_by_error = true;
    return r;
  };

  if (!rs.agent)
    return finish(
        {Outcome::kErrored, "agent '" + step.agent + "' is not defined"});
  if (!ex_.opts.agents) {
    return finish(
        {Outcome::kErrored, "agent step '" + step.name +
                                "' cannot run: no agent runner is available"});
  }
  if (rs.dials.sandbox.value.bwrap()) {
    if (Status s = ex_.SandboxReady(); !s.ok())
      return finish({Outcome::kErrored, s.message()});
  }
  agent::AgentInvocation inv =
      MakeInvocation(ex_.plan.pipeline(), *rs.agent, rs.source, rs.dials,
                     step.name, ex_.opts.lookup_env);
  for (const std::string& m : step.messages) {
    Result<std::string> text =
        RenderTemplateRoots(m, scope.vars, scope.var_names);
    if (!text.ok()) return finish({Outcome::kErrored, text.status().message()});
    inv.messages.push_back(*text);
  }
  inv.context_paths = step.context_paths;
  inv.critique = scope.critique;
  inv.timeout = timeout;
  if (timeout && timeout->count() > 0) inv.deadline = deadline;
  if (timeout != rs.dials.timeout.value)
    inv.whole_timeout = rs.dials.timeout.value;
  if (resume) {
    if (auto it = resume->conversations.find(ref.id);
        it != resume->conversations.end())
      inv.resume_from = it->second;
  }
  // Agent steps of a job share its workspace: the artifacts of earlier
  // steps, where what the agent writes is seen by later ones.
  inv.working_dir = fs::absolute(fs::path(job_dir_) / "artifacts").string();

  agent::AgentResult ar = Converse(inv, scope, ref);
  record.agent = ar;
  StepResult r{ar.outcome, ar.error, ar.answer};
  if (r.ok()) JudgeAnswer(step, scope, ref, ar, start, attempt, r);
  return finish(std::move(r));
}

void JobRunner::JudgeAnswer(const Step& step, const Scope& scope,
                            const StepRef& ref, const agent::AgentResult& ar,
                            SteadyTime start, AttemptRecord& attempt,
                            StepResult& r) {
  AssertSubject subject;
  subject.kind = StepKind::kAgent;
  subject.output = r.output;
  subject.conversation = &ar;
  subject.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  attempt.assertions = JudgeAssert(step, scope, ref, subject);
  if (std::optional<std::string> miss = DescribeMisses(attempt.assertions)) {
    r.outcome = Outcome::kFailed;
    r.error = *miss;
  }
}

agent::AgentResult JobRunner::Converse(const agent::AgentInvocation& inv,
                                       const Scope& scope, const StepRef& ref) {
  agent::AgentContext ctx;
  ctx.clock = &clock_;
  ctx.cancel = scope.token;
  ctx.launcher = ex_.opts.launcher;
  ctx.shared_budgets = scope.budgets;
  // An agent step's conversation goes under its attempt's span; a fixer's
  // or a judge's (no attempts of their own) under its step's.
  if (ex_.opts.trace.valid()) {
    ctx.trace_parent = ex_.opts.trace;
    ctx.trace_parent.span_id =
        ref.fixer || ref.judge
            ? StepSpanId(ex_.opts.trace.trace_id, ex_.opts.run_id, ref.id)
            : AttemptSpanId(ex_.opts.trace.trace_id, ex_.opts.run_id, ref.id,
                            1);
  }
  ctx.events.on_turn = [&](const agent::AgentTurnRecord& t) {
    ex_.observer().OnAgentTurn(ref, t);
  };
  ctx.events.on_log = [&](const std::string& line) {
    ex_.observer().OnLog(ref, line);
  };
  ctx.events.on_checkpoints =
      [&](const std::vector<agent::ConversationCheckpoint>& cps) {
        ex_.observer().OnCheckpoints(ref, cps);
      };
  agent::AgentResult ar;
  {
    // Every conversation holds its descriptors while it runs (its socket,
    // and its MCP servers' pipes): a fan-out wider than the descriptor
    // limit allows waits here, never fails with EMFILE.
    const size_t servers = McpServersGranted(ex_.plan.pipeline(), inv.tools);
    DescriptorGate::Lease slot = DescriptorGate::Conversations().Acquire(
        ctx.cancel,
        kDescriptorsPerConversation + servers * kDescriptorsPerMcpServer);
    if (servers > 0) {
      ar = ConverseWithMcp(inv, ctx);
    } else {
      ar = ex_.opts.agents->Run(inv, ctx);
    }
  }
  // An across budget is charged once the conversation is over: it decides
  // admission of further cells, never this one.
  for (const auto& meter : scope.charge_only) {
    meter->Add(ar.prompt_tokens + ar.completion_tokens, ar.usd);
  }
  return ar;
}

AssertionResult JobRunner::RunJudge(const Step& step, const Scope& scope,
                                    const StepRef& step_ref,
                                    const std::string& output) {
  const JudgeSpec& judge = *step.check->judge;
  const ResolvedStep& rs = ex_.plan.For(step);
  AssertionResult verdict;
  verdict.name = "judge";
  verdict.passed = false;
  StepRef ref;
  ref.id = step_ref.id + "/judge";
  ref.job = job_.name;
  ref.name = judge.agent;
  ref.agent = judge.agent;
  ref.kind = StepKind::kAgent;
  ref.judge = true;
  ref.line = judge.line;
  ref.cell = step_ref.cell;
  StepRecord record;
  record.ref = ref;
  record.started = clock_.WallNow();
  const SteadyTime start = clock_.Now();
  std::optional<SteadyTime> deadline;
  if (rs.judge_dials && rs.judge_dials->timeout.value)
    deadline = start + *rs.judge_dials->timeout.value;
  ex_.observer().OnStepStart(ref, deadline);
  StepResult r;
  if (!rs.judge_agent || !rs.judge_dials || !rs.judge_source) {
    r = {Outcome::kErrored, "judge agent '" + judge.agent + "' is not defined"};
  } else if (!ex_.opts.agents) {
    r = {Outcome::kErrored, "judge agent '" + judge.agent +
                                "' cannot run: no agent runner is available"};
  } else if (Status s = rs.judge_dials->sandbox.value.bwrap()
                            ? ex_.SandboxReady()
                            : Status::Ok();
             !s.ok()) {
    r = {Outcome::kErrored, s.message()};
  } else {
    agent::AgentInvocation inv = MakeInvocation(
        ex_.plan.pipeline(), *rs.judge_agent, *rs.judge_source, *rs.judge_dials,
        step.name + "/judge", ex_.opts.lookup_env);
    inv.messages.push_back(JudgePrompt(judge.rubric, output));
    inv.working_dir = fs::absolute(fs::path(job_dir_) / "artifacts").string();
    agent::AgentResult ar = Converse(inv, scope, ref);
    record.agent = ar;
    r = {ar.outcome, ar.error, ar.answer};
  }
  if (r.ok()) {
    verdict = ParseJudgeVerdict(r.output);
  } else {
    verdict.detail = "the judge '" + judge.agent + "' gave no verdict (" +
                     std::string(OutcomeName(r.outcome)) + ": " + r.error + ")";
  }
  record.outcome = r.outcome;
  record.error = r.error;
  record.output = r.output;
  record.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  Finish(std::move(record), false);
  return verdict;
}

namespace {

// Whether the step's own deadline has passed: the one computed when the
// step began, when the invocation carries it (time spent before `start`
// counts against it too); else `timeout` from `start`.
bool StepDeadlinePassed(const agent::AgentInvocation& inv, SteadyTime start,
                        SteadyTime now) {
  if (!inv.timeout || inv.timeout->count() <= 0) return false;
  if (inv.deadline) return now >= *inv.deadline;
  return now - start >= *inv.timeout;
}

}  // namespace

agent::AgentResult JobRunner::ConverseWithMcp(const agent::AgentInvocation& inv,
                                              const agent::AgentContext& ctx) {
  agent::AgentInvocation with_mcp = inv;
  McpStepServers servers;  // Stopped when this returns, however it ends.
  std::unique_ptr<LocalProcessLauncher> own_launcher;
  ProcessLauncher* launcher = ctx.launcher;
  if (launcher == nullptr) {
    own_launcher = std::make_unique<LocalProcessLauncher>(clock_);
    launcher = own_launcher.get();
  }
  const SteadyTime start = clock_.Now();
  Status s = StartMcpServers(ex_.plan.pipeline(), with_mcp, *launcher, clock_,
                             ctx.cancel, ex_.opts.lookup_env, servers);
  if (s.ok()) return ex_.opts.agents->Run(with_mcp, ctx);
  agent::AgentResult ar;
  ar.error = s.message();
  ar.outcome = Outcome::kErrored;
  if (s.code() == StatusCode::kCancelled || ctx.cancel.cancelled()) {
    ar.outcome = Outcome::kAborted;
  } else if (s.code() == StatusCode::kDeadlineExceeded &&
             StepDeadlinePassed(inv, start, clock_.Now())) {
    ar.outcome = Outcome::kFailed;  // The step's own deadline: failed.
  }
  LogEvent(LogLevel::kWarn, "agent.mcp_failed",
           {{"agent", inv.agent_name}, {"error", ar.error}});
  return ar;
}

StepRef JobRunner::FixerRef(const Step& task, const StepRef& task_ref) const {
  StepRef ref;
  ref.id = task_ref.id + "/fix";
  ref.job = job_.name;
  ref.name = task.fix->agent;
  ref.agent = task.fix->agent;
  ref.kind = StepKind::kAgent;
  ref.fixer = true;
  ref.line = task.fix->line;
  ref.cell = task_ref.cell;
  return ref;
}

StepResult JobRunner::ReplayStored(const StepRef& ref, const Scope& scope,
                                   const StepRecord& stored) {
  StepRecord rec = stored;
  rec.ref = ref;
  rec.resumed = true;
  // What an agent step spent still counts toward the budgets around it.
  if (const std::optional<agent::AgentResult>& a = rec.agent) {
    for (const auto* meters : {&scope.budgets, &scope.charge_only}) {
      for (const auto& meter : *meters)
        meter->Add(a->prompt_tokens + a->completion_tokens, a->usd);
    }
  }
  StepResult r(rec.outcome, rec.error, rec.output);
  r.caused_by_error = rec.outcome == Outcome::kErrored;
  Finish(std::move(rec), true);
  return r;
}

StepResult JobRunner::RunFixer(const Step& task, const Scope& scope,
                               const StepRef& task_ref,
                               const std::string& workdir,
                               const AttemptRecord& failed,
                               const ResumedFixer* resumed) {
  const ResolvedStep& rs = ex_.plan.For(task);
  const StepRef ref = FixerRef(task, task_ref);
  if (resumed && resumed->finished)
    return ReplayStored(ref, scope, *resumed->finished);
  StepRecord record;
  record.ref = ref;
  record.started = resumed ? resumed->started : clock_.WallNow();
  // A resumed fixer's time so far counts: it started that long ago.
  const Millis spent = resumed ? resumed->spent : Millis(0);
  const SteadyTime start = clock_.Now() - spent;
  std::optional<SteadyTime> deadline;
  std::optional<Millis> timeout;
  if (rs.fix_dials && rs.fix_dials->timeout.value) {
    timeout = *rs.fix_dials->timeout.value;
    if (timeout->count() > 0 && spent.count() > 0)
      timeout = std::max(*timeout - spent, Millis(1));
    deadline = clock_.Now() + *timeout;
  }
  ex_.observer().OnStepStart(ref, deadline);
  StepResult r;
  if (!rs.fix_agent || !rs.fix_dials) {
    r = {Outcome::kErrored,
         "fix agent '" + task.fix->agent + "' is not defined"};
  } else if (!ex_.opts.agents) {
    r = {Outcome::kErrored, "fix agent '" + task.fix->agent +
                                "' cannot run: no agent runner is available"};
  } else if (Status s = rs.fix_dials->sandbox.value.bwrap() ? ex_.SandboxReady()
                                                            : Status::Ok();
             !s.ok()) {
    r = {Outcome::kErrored, s.message()};
  } else {
    const ModelSource& primary = rs.fix_agent->source
                                     ? *rs.fix_agent->source
                                     : *ex_.plan.pipeline().defaults.source;
    agent::AgentInvocation inv =
        MakeInvocation(ex_.plan.pipeline(), *rs.fix_agent, primary,
                       *rs.fix_dials, task.name + "/fix", ex_.opts.lookup_env);
    std::string output =
        failed.output.size() > 4000
            ? "...\n" + failed.output.substr(failed.output.size() - 4000)
            : failed.output;
    inv.messages.push_back(
        "The task '" + task.name + "' failed in this directory (" +
        failed.error + "). Its script:\n" + task.run + "\nIts output:\n" +
        output +
        "\nFix the cause here, in this directory, so that the task succeeds "
        "when it runs "
        "again. Answer with a short summary of what you changed.");
    inv.working_dir = fs::absolute(workdir).string();
    if (timeout && timeout->count() > 0) inv.deadline = deadline;
    if (resumed && resumed->conversation) {
      inv.resume_from = *resumed->conversation;
      if (timeout != rs.fix_dials->timeout.value) {
        inv.timeout = timeout;
        inv.whole_timeout = rs.fix_dials->timeout.value;
      }
    }
    agent::AgentResult ar = Converse(inv, scope, ref);
    record.agent = ar;
    r = {ar.outcome, ar.error, ar.answer};
  }
  record.outcome = r.outcome;
  record.error = r.error;
  record.output = r.output;
  record.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  Finish(std::move(record), true);
  return r;
}

}  // namespace steps::pipeline::internal
