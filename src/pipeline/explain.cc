#include "pipeline/explain.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "pipeline/executor.h"
#include "pipeline/template.h"
#include "process/slurm_launcher.h"

namespace steps::pipeline {
namespace {

// The sbatch options a placement gives, as a shell would take them (an
// option with a space or a quote in it is quoted); "cluster defaults" for
// none.
std::string PlacementText(const ClusterPlacement& p) {
  std::string text;
  for (const std::string& a : SbatchPlacementArgs(p)) {
    const bool plain =
        !a.empty() && a.find_first_not_of(
                          "abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789-_=:,./+@%") == std::string::npos;
    text += (text.empty() ? "" : " ") + (plain ? a : ShellQuote(a));
  }
  return text.empty() ? "cluster defaults" : text;
}

// Bounds saturate here instead of overflowing: 80 exponential retries or a
// million attempts are "over 100 years", never a wrapped or absurd number.
constexpr Millis kForever = Millis::max();
constexpr Millis kHundredYears{int64_t{36525} * 24 * 3600 * 1000};

Millis Add(Millis a, Millis b) { return a > kForever - b ? kForever : a + b; }

Millis Times(Millis a, int64_t n) {
  if (n <= 0) return Millis(0);
  return a.count() > kForever.count() / n ? kForever : a * n;
}

std::string Fmt(Millis d) {
  return d >= kHundredYears ? "over 100 years" : FormatDuration(d);
}

// How long a timed-out task, get or put attempt may still take: its process
// group gets SIGTERM at the deadline and SIGKILL this much later.
Millis KillGrace() {
  static const Millis grace = ExecutorOptions().kill_grace;
  return grace;
}

Bound Unbounded(std::string why) { return Bound{std::nullopt, std::move(why)}; }

// What a bound depends on besides the step: the job it runs in.
struct BoundContext {
  const ResolvedPlan& plan;
  int max_visits = kDefaultMaxVisits;  // Runs of one step via `to:`.
};

Bound StepBoundIn(const BoundContext& c, const Step& s);

// Worst case of running `bounds` with at most `limit` at a time: never more
// than all in sequence, and for greedy scheduling never more than the total
// spread over the slots plus the longest one.
Bound Parallel(const std::vector<Bound>& bounds, size_t limit,
               const std::string& what) {
  if (bounds.empty()) return Bound{Millis(0), "nothing to run"};
  Millis sum(0), longest(0);
  for (const Bound& b : bounds) {
    if (!b.bounded())
      return Unbounded("one of its " + what + " is unbounded: " + b.why);
    sum = Add(sum, *b.value);
    longest = std::max(longest, *b.value);
  }
  if (limit >= bounds.size()) {
    return Bound{longest, std::to_string(bounds.size()) + " " + what +
                              " at once: the longest of them"};
  }
  Millis spread =
      Add(Millis(sum.count() / static_cast<int64_t>(limit)), longest);
  Millis v = std::min(sum, spread);
  return Bound{v, std::to_string(bounds.size()) + " " + what + ", " +
                      std::to_string(limit) + " at a time: at most total/" +
                      std::to_string(limit) + " + longest"};
}

// For each step of a sequence, whether `to:` routing can run it again: a
// step between a route's target and its source (both included) runs up to
// max_visits times, as the executor counts; any other step once.
std::vector<bool> Revisited(const std::vector<StepPtr>& steps) {
  std::vector<bool> again(steps.size(), false);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i] || !steps[i]->route_to) continue;
    size_t target = steps.size();
    for (size_t j = 0; j < steps.size(); ++j) {
      if (steps[j] && steps[j]->name == *steps[i]->route_to) target = j;
    }
    for (size_t k = target; k <= i && k < steps.size(); ++k) again[k] = true;
  }
  return again;
}

Bound Sequence(const std::vector<StepPtr>& steps, const BoundContext& c) {
  const std::vector<bool> again = Revisited(steps);
  Millis sum(0);
  int routed = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    Bound b = StepBoundIn(c, *steps[i]);
    if (!b.bounded())
      return Unbounded("step '" + steps[i]->name + "' is unbounded: " + b.why);
    routed += again[i];
    sum = Add(sum, Times(*b.value, again[i] ? c.max_visits : 1));
  }
  if (routed == 0) return Bound{sum, "the sum of its steps"};
  return Bound{sum, "the sum of its steps, " + std::to_string(routed) +
                        " of them run up to max_visits " +
                        std::to_string(c.max_visits) +
                        " times through to: routing"};
}

// How long the step's `assert: {judge}` may run after each attempt: zero
// without a judge, nullopt when the judge has no deadline.
std::optional<Millis> JudgeTime(const ResolvedStep& r) {
  if (!r.judge_dials) return Millis(0);
  return r.judge_dials->timeout.value;
}

Bound WorkBound(const ResolvedPlan& plan, const Step& s) {
  const ResolvedStep& r = plan.For(s);
  const std::optional<Millis> judge = JudgeTime(r);
  if (!judge) {
    return Unbounded("its judge '" + s.check->judge->agent +
                     "' has no deadline");
  }
  const std::string judged =
      judge->count() > 0 ? " + judge " + Fmt(*judge) : "";
  if (s.kind == StepKind::kAgent) {
    if (!r.agent) return Unbounded("unknown agent");
    if (!r.dials.timeout.value) {
      return Unbounded(
          "timeout \"0\": no deadline; only budget, max_turns and loop "
          "detection bound the conversation");
    }
    if (judge->count() > 0) {
      return Bound{Add(*r.dials.timeout.value, *judge),
                   "the conversation's deadline " +
                       Fmt(*r.dials.timeout.value) + judged};
    }
    return Bound{*r.dials.timeout.value,
                 "the deadline covers every request, retry wait, "
                 "tool call and fallback source"};
  }
  const int n = r.dials.attempts.value;
  const std::string grace = "kill grace " + Fmt(KillGrace());
  if (!r.dials.timeout.value) {
    std::string why = std::string(StepKindName(s.kind)) +
                      " steps have no default timeout and this one sets none";
    if (r.total_timeout) {
      return Bound{Add(*r.total_timeout, KillGrace()),
                   "each attempt unbounded, but retry.total_timeout_seconds "
                   "caps all attempts together (+ " +
                       grace + ")"};
    }
    return Unbounded(why);
  }
  // At its deadline an attempt's processes get SIGTERM, and SIGKILL only
  // after the kill grace: that is how long a timed-out attempt can last.
  Millis t = Add(*r.dials.timeout.value, KillGrace());
  Millis per_attempt = t;
  std::string how = std::to_string(n) + " × (" + Fmt(*r.dials.timeout.value) +
                    " + " + grace + ")";
  if (r.fix_dials) {
    if (!r.fix_dials->timeout.value) {
      return Unbounded("its fixer '" + s.fix->agent + "' has no deadline");
    }
    per_attempt = Add(Times(t, 2), *r.fix_dials->timeout.value);
    how = std::to_string(n) + " × (" + Fmt(t) + " + fixer " +
          Fmt(*r.fix_dials->timeout.value) + " + re-run " + Fmt(t) + judged +
          "), each run with its " + grace;
  } else if (judge->count() > 0) {
    how = std::to_string(n) + " × (" + Fmt(*r.dials.timeout.value) + " + " +
          grace + judged + ")";
  }
  per_attempt = Add(per_attempt, *judge);
  Millis total = Times(per_attempt, n);
  Millis waits(0);
  for (Millis w : r.retry_waits) waits = Add(waits, w);
  if (waits.count() > 0) how += " + waits " + Fmt(waits);
  total = Add(total, waits);
  if (r.total_timeout && Add(*r.total_timeout, KillGrace()) < total) {
    return Bound{Add(*r.total_timeout, KillGrace()),
                 how + " = " + Fmt(total) +
                     ", capped by retry.total_timeout_seconds (+ " + grace +
                     ")"};
  }
  return Bound{total, how};
}

Bound WithHooks(Bound body, const Hooks& hooks, const BoundContext& c) {
  if (!body.bounded()) return body;
  Millis worst_outcome_hook(0);
  for (HookKind k : {HookKind::kOnSuccess, HookKind::kOnFailure,
                     HookKind::kOnError, HookKind::kOnAbort}) {
    if (!hooks.Get(k)) continue;
    Bound b = StepBoundIn(c, *hooks.Get(k));
    if (!b.bounded()) {
      return Unbounded(std::string("its ") + HookKindName(k) +
                       " hook is unbounded: " + b.why);
    }
    worst_outcome_hook = std::max(worst_outcome_hook, *b.value);
  }
  Millis ensure(0);
  if (hooks.ensure) {
    Bound b = StepBoundIn(c, *hooks.ensure);
    if (!b.bounded())
      return Unbounded("its ensure hook is unbounded: " + b.why);
    ensure = *b.value;
  }
  if (worst_outcome_hook.count() == 0 && ensure.count() == 0) return body;
  return Bound{Add(Add(*body.value, worst_outcome_hook), ensure),
               body.why + ", plus its hooks"};
}

// A gate waits for a person at most its timeout; without one, only the
// job's deadline (which cuts a waiting gate) bounds it.
Bound GateBound(const Step& s) {
  if (!s.timeout.has_value()) {
    return Unbounded(
        "a gate without 'timeout' waits for a person until the job's "
        "deadline, and this job has none");
  }
  std::string why = "waits for a decision at most its timeout, then ";
  if (!s.gate || !s.gate->on_expiry) {
    why += "fails";
  } else {
    why +=
        *s.gate->on_expiry == GateDecision::kApprove ? "approves" : "rejects";
  }
  return Bound{*s.timeout, why};
}

Bound StepBoundIn(const BoundContext& c, const Step& s) {
  Bound body;
  switch (s.kind) {
    case StepKind::kGate:
      body = GateBound(s);
      break;
    case StepKind::kTask:
    case StepKind::kGet:
    case StepKind::kPut:
    case StepKind::kAgent:
      body = WorkBound(c.plan, s);
      break;
    case StepKind::kDo:
    case StepKind::kTry:
      body = Sequence(s.steps, c);
      break;
    case StepKind::kInParallel: {
      std::vector<Bound> branches;
      for (const StepPtr& b : s.steps) branches.push_back(StepBoundIn(c, *b));
      size_t limit =
          s.limit.has_value() ? static_cast<size_t>(*s.limit) : branches.size();
      body = Parallel(branches, std::max<size_t>(limit, 1), "branches");
      break;
    }
    case StepKind::kAcross: {
      Bound cell = Sequence(s.steps, c);
      size_t cells = 1, in_flight = 1;
      for (const AcrossVar& v : s.across) {
        cells *= v.values.size();
        in_flight *= v.max_in_flight.has_value()
                         ? std::min<size_t>(*v.max_in_flight, v.values.size())
                         : v.values.size();
      }
      body = Parallel(std::vector<Bound>(cells, cell),
                      std::max<size_t>(in_flight, 1), "cells");
      break;
    }
  }
  return WithHooks(std::move(body), s.hooks, c);
}

// The longest stretch of `s` that can start before the job's deadline and
// run on past it: the deadline is checked between steps and before each
// branch or cell of a fan-out, so what passes it is one work step (its
// hooks included), and a block's hooks after it.
Bound Overrun(const BoundContext& c, const Step& s) {
  // A waiting gate ends at the job's deadline: only its hooks run past it.
  if (s.kind == StepKind::kGate) {
    return WithHooks(Bound{Millis(0), "a gate ends at the deadline"}, s.hooks,
                     c);
  }
  if (!s.is_container()) return StepBoundIn(c, s);
  Bound longest{Millis(0), ""};
  for (const StepPtr& child : s.steps) {
    Bound b = Overrun(c, *child);
    if (!b.bounded()) return b;
    if (*b.value >= *longest.value) longest = b;
  }
  return WithHooks(std::move(longest), s.hooks, c);
}

// `b` (of steps starting no earlier than the job) under the job's own
// deadline: never more than the deadline plus what can overrun it.
Bound UnderJobDeadline(Bound b, const BoundContext& c, const Job& job,
                       const std::vector<const Step*>& steps) {
  if (!job.timeout.has_value()) return b;
  Millis overrun(0);
  for (const Step* s : steps) {
    Bound o = Overrun(c, *s);
    if (!o.bounded()) return b;
    overrun = std::max(overrun, *o.value);
  }
  Millis cap = Add(*job.timeout, overrun);
  if (b.bounded() && *b.value <= cap) return b;
  return Bound{cap, "the job timeout " + Fmt(*job.timeout) + " plus " +
                        Fmt(overrun) +
                        ", the longest step, branch or cell that can start "
                        "before it (what runs at the deadline finishes)" +
                        (b.bounded() ? "; without the deadline " +
                                           Fmt(*b.value) + " (" + b.why + ")"
                                     : "")};
}

BoundContext ContextOf(const ResolvedPlan& plan, const Job& job) {
  return BoundContext{
      plan, job.max_visits.has_value() ? *job.max_visits : kDefaultMaxVisits};
}

std::string Pad(const std::string& s, size_t width) {
  // Width in characters, counting UTF-8 continuation bytes out.
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return chars + 2 > width ? s + "  " : s + std::string(width - chars, ' ');
}

std::string OriginText(DialOrigin origin, int line) {
  std::string out = DialOriginName(origin);
  if (line > 0) out += " (line " + std::to_string(line) + ")";
  return out;
}

template <typename T>
std::string OptText(const std::optional<T>& v, const std::string& none,
                    std::string (*fmt)(T)) {
  return v ? fmt(*v) : none;
}

std::string IntText(int64_t v) { return std::to_string(v); }
std::string BytesText(int64_t v) {
  if (v % (1024 * 1024) == 0) return std::to_string(v / (1024 * 1024)) + " MiB";
  if (v % 1024 == 0) return std::to_string(v / 1024) + " KiB";
  return std::to_string(v) + " bytes";
}

std::string BudgetText(const Budget& b) {
  std::string out;
  if (b.tokens)
    out += *b.tokens ? std::to_string(*b.tokens) + " tokens" : "no token limit";
  if (b.usd) {
    std::ostringstream usd;
    usd << "$" << *b.usd;
    out += (out.empty() ? "" : ", ") +
           (*b.usd ? usd.str() : std::string("no USD limit"));
  }
  return out;
}

class Printer {
 public:
  explicit Printer(const ResolvedPlan& plan) : plan_(plan) {}

  void Job(const pipeline::Job& job) {
    out_ << "job " << job.name << "  (line " << job.line << ")\n";
    Row(2, "timeout", job.timeout.has_value() ? Fmt(*job.timeout) : "none",
        job.timeout.has_value()
            ? "job (line " + std::to_string(job.timeout.line) +
                  "); checked between steps, never during one; hooks run past it, each bounded by its "
                  "own timeout; a waiting gate ends at it"
            : "not set: the job has no deadline of its own");
    if (job.budget)
      Row(2, "budget", BudgetText(*job.budget),
          "job, for its agent steps together");
    Row(2, "max_visits",
        std::to_string(job.max_visits.has_value() ? *job.max_visits
                                                  : kDefaultMaxVisits),
        job.max_visits.has_value()
            ? "job (line " + std::to_string(job.max_visits.line) + ")"
            : "default; runs of one step through to: routing");
    job_ = &job;
    Bound b = JobBound(plan_, job);
    Row(2, "bound", b.bounded() ? Fmt(*b.value) : "unbounded", b.why);
    int i = 1;
    for (const StepPtr& s : job.plan) Step(*s, 2, std::to_string(i++) + ".");
    for (HookKind k : kAllHooks) {
      if (job.hooks.Get(k)) Step(*job.hooks.Get(k), 2, HookKindName(k));
    }
    out_ << "\n";
  }

  std::string str() const { return out_.str(); }

 private:
  void Row(int indent, const std::string& key, const std::string& value,
           const std::string& origin) {
    out_ << std::string(indent + 2, ' ') << Pad(key, 19) << Pad(value, 14)
         << origin << "\n";
  }

  // "params  temperature=0.2 seed=7  for openai/gpt-4o (source, line 4;
  // agent entry, line 9)": what one hosted source is sent, and from where.
  void ParameterRows(const ModelSource& source, const AgentEntry& agent,
                     int indent) {
    if (source.is_cli()) return;
    const ModelParameters p = source.params.Over(agent.params);
    if (p.empty()) return;
    std::vector<std::string> parts;
    auto number = [](double v) { return nlohmann::json(v).dump(); };
    if (p.temperature) parts.push_back("temperature=" + number(*p.temperature));
    if (p.top_p) parts.push_back("top_p=" + number(*p.top_p));
    if (p.seed) parts.push_back("seed=" + std::to_string(*p.seed));
    if (p.max_output_tokens)
      parts.push_back("max_output_tokens=" +
                      std::to_string(*p.max_output_tokens));
    if (!p.stop.empty())
      parts.push_back("stop=" + nlohmann::json(p.stop).dump());
    if (p.json_schema) parts.push_back("response_format=json_schema");
    std::string value;
    for (const std::string& part : parts)
      value += (value.empty() ? "" : " ") + part;
    std::string origin = "for " + source.model + " (";
    if (!source.params.empty())
      origin += "source, line " + std::to_string(source.line);
    if (!agent.params.empty()) {
      if (!source.params.empty()) origin += "; ";
      origin += "agent entry, line " + std::to_string(agent.params_line);
    }
    Row(indent, "params", value, origin + ")");
  }

  // The names of a hosted source's `headers:` (their values may hold
  // secrets, so they are not shown).
  void HeaderRow(const ModelSource& source, int indent) {
    if (source.headers.empty()) return;
    std::string names;
    for (const auto& [name, value] : source.headers)
      names += (names.empty() ? "" : ", ") + name;
    Row(indent, "headers", names,
        "for " + source.model + " (source, line " +
            std::to_string(source.line) + "); values not shown");
  }

  void Step(const pipeline::Step& s, int indent, const std::string& label) {
    out_ << "\n"
         << std::string(indent, ' ') << label << " " << StepKindName(s.kind);
    if (!s.is_container()) out_ << " " << s.name;
    out_ << "  (line " << s.line << ")\n";
    const ResolvedStep& r = plan_.For(s);
    if (s.kind == StepKind::kAgent && r.agent) {
      out_ << std::string(indent + 2, ' ') << Pad("source", 19)
           << r.source.Describe();
      for (const ModelSource& f : r.agent->fallback)
        out_ << " → " << f.Describe();
      out_ << "\n";
      ParameterRows(r.source, *r.agent, indent);
      HeaderRow(r.source, indent);
      for (const ModelSource& f : r.agent->fallback) {
        ParameterRows(f, *r.agent, indent);
        HeaderRow(f, indent);
      }
      AgentDials(r.dials, indent);
      GuardRows(r, indent);
      CommandToolRows(*r.agent, r.dials, indent);
      McpServerRows(*r.agent, r.dials, indent);
    } else if (s.kind == StepKind::kGate) {
      GateRows(s, indent);
    } else if (!s.is_container()) {
      const ResolvedDials& d = r.dials;
      Row(indent, "timeout", OptText<Millis>(d.timeout.value, "none", Fmt),
          d.timeout.value
              ? OriginText(d.timeout.origin, d.timeout.line) + ", per attempt"
              : "not set: no deadline (tasks, gets and puts have no default)");
      Row(indent, "attempts", std::to_string(d.attempts.value),
          OriginText(d.attempts.origin, d.attempts.line));
      if (s.retry) RetryRows(s, r, indent);
      SandboxRow(indent, "sandbox", d.sandbox, "its script");
      RunnerRows(d, indent);
      if (r.fix_dials) {
        Row(indent, "fix", s.fix->agent,
            "runs once per failed attempt in the task's directory, then the "
            "task re-runs");
        Row(indent + 2, "fix attempts",
            std::to_string(r.fix_dials->attempts.value),
            OriginText(r.fix_dials->attempts.origin,
                       r.fix_dials->attempts.line));
        Row(indent + 2, "fix timeout",
            OptText<Millis>(r.fix_dials->timeout.value, "none", Fmt),
            OriginText(r.fix_dials->timeout.origin, r.fix_dials->timeout.line));
        SandboxRow(indent + 2, "fix sandbox", r.fix_dials->sandbox,
                   "the fixer's run_shell");
      }
    } else {
      ContainerRows(s, indent);
    }
    if (r.judge_dials) JudgeRows(s, r, indent);
    if (!r.identity.empty())
      Row(indent, "identity", r.identity.substr(0, 8), "cache key");
    Bound b = StepBound(plan_, *job_, s);
    if (b.bounded() && QueueOutsideTimeout(r.dials, s))
      b.why += b.why.empty() ? "plus time in Slurm's queue"
                             : ", plus time in Slurm's queue";
    Row(indent, "bound", b.bounded() ? Fmt(*b.value) : "unbounded", b.why);
    int i = 1;
    for (const StepPtr& child : s.steps) {
      Step(*child, indent + 4, std::to_string(i++) + ".");
    }
    for (HookKind k : kAllHooks) {
      if (s.hooks.Get(k)) Step(*s.hooks.Get(k), indent + 4, HookKindName(k));
    }
  }

  // Who may decide a gate, how long it waits and what its expiry decides.
  void GateRows(const pipeline::Step& s, int indent) {
    const GateSpec& g = *s.gate;
    std::string who;
    for (const std::string& a : g.approvers)
      who += (who.empty() ? "" : ", ") + a;
    Row(indent, "approvers", who.empty() ? "anyone" : who,
        who.empty() ? "not set: any user of the state folder, or the web UI"
                    : "gate (line " + std::to_string(g.approvers_line) +
                          "); decided from the CLI or MCP as these OS users, "
                          "never from the web UI");
    Row(indent, "timeout", s.timeout.has_value() ? Fmt(*s.timeout) : "none",
        s.timeout.has_value() ? "step (line " + std::to_string(s.timeout.line) +
                                    "), how long it waits for a person"
                              : "not set: it waits until the job's deadline");
    Row(indent, "default",
        g.on_expiry ? GateDecisionName(*g.on_expiry) : "fail",
        g.on_expiry ? "gate (line " + std::to_string(g.default_line) +
                          "), what its expiry decides"
                    : "not set: the gate fails when its timeout passes");
  }

  void AgentDials(const ResolvedDials& d, int indent) {
    Row(indent, "timeout", OptText<Millis>(d.timeout.value, "none", Fmt),
        OriginText(d.timeout.origin, d.timeout.line) +
            (d.timeout.value
                 ? ", the whole conversation"
                 : ": no deadline, nothing disclosed to the model"));
    Row(indent, "attempts", std::to_string(d.attempts.value),
        OriginText(d.attempts.origin, d.attempts.line) +
            ", provider requests per failing turn");
    Row(indent, "max_turns",
        OptText<int64_t>(d.max_turns.value, "no cap", IntText),
        OriginText(d.max_turns.origin, d.max_turns.line));
    Row(indent, "max_context_bytes",
        OptText<int64_t>(d.max_context_bytes.value, "whole files", BytesText),
        OriginText(d.max_context_bytes.origin, d.max_context_bytes.line));
    Row(indent, "llm_timeout",
        OptText<Millis>(d.llm_timeout.value, "none", Fmt),
        OriginText(d.llm_timeout.origin, d.llm_timeout.line) +
            (d.llm_timeout.value ? ", per request"
                                 : ": each request bounded by the deadline"));
    Row(indent, "tool_timeout",
        OptText<Millis>(d.tool_timeout.value, "none", Fmt),
        OriginText(d.tool_timeout.origin, d.tool_timeout.line) +
            ", per tool call");
    Row(indent, "budget", d.budget.value ? BudgetText(*d.budget.value) : "none",
        d.budget.value ? OriginText(d.budget.origin, d.budget.line)
                       : "not set");
    SandboxRow(indent, "sandbox", d.sandbox, "run_shell");
  }

  // What protects the provider, where declared: each source's rate limit,
  // the retry budget and the circuit of its hosts.
  void GuardRows(const ResolvedStep& r, int indent) {
    std::vector<const ModelSource*> sources = {&r.source};
    for (const ModelSource& f : r.agent->fallback) sources.push_back(&f);
    for (const ModelSource* s : sources) {
      if (!s->rate_limit) continue;
      const RateLimitSpec& l = *s->rate_limit;
      std::vector<std::string> parts;
      if (l.max_concurrent)
        parts.push_back("max_concurrent " + std::to_string(l.max_concurrent));
      if (l.requests_per_minute)
        parts.push_back("requests_per_minute " +
                        std::to_string(l.requests_per_minute));
      if (l.tokens_per_minute)
        parts.push_back("tokens_per_minute " +
                        std::to_string(l.tokens_per_minute));
      std::string value;
      for (const std::string& part : parts)
        value += (value.empty() ? "" : ", ") + part;
      Row(indent, "rate_limit", value.empty() ? "the server's headers" : value,
          "for " + s->model + " (source, line " +
              std::to_string(s->rate_limit_line) +
              "), shared by every step sending to it; lowered by its "
              "server's x-ratelimit headers");
    }
    const ResolvedDials& d = r.dials;
    if (const auto& b = d.retry_budget.value) {
      Row(indent, "retry_budget",
          "ratio " + nlohmann::json(b->ratio).dump() + ", min_retries " +
              std::to_string(b->min_retries),
          OriginText(d.retry_budget.origin, d.retry_budget.line) +
              ", per host: retries at most that share of its calls of the "
              "last 10s, within attempts");
    }
    if (const auto& c = d.circuit.value) {
      Row(indent, "circuit",
          "failures " + std::to_string(c->failures) + ", probe_after " +
              Fmt(c->probe_after),
          OriginText(d.circuit.origin, d.circuit.line) +
              ", per host: then requests wait (within the deadline) for a "
              "probe to succeed");
    }
  }

  // The agent that grades the step's output (`assert: {judge}`): its
  // source and the limits its conversation runs under, after each attempt.
  void JudgeRows(const pipeline::Step& s, const ResolvedStep& r, int indent) {
    const ResolvedDials& d = *r.judge_dials;
    Row(indent, "judge", s.check->judge->agent,
        "assert judge (line " + std::to_string(s.check->judge->line) +
            "): grades the step's output, after each attempt");
    if (r.judge_source) {
      Row(indent + 2, "judge source", r.judge_source->Describe(),
          "agent entry '" + s.check->judge->agent + "'");
    }
    Row(indent + 2, "judge timeout",
        OptText<Millis>(d.timeout.value, "none", Fmt),
        OriginText(d.timeout.origin, d.timeout.line) +
            (d.timeout.value ? ", its whole conversation"
                             : ": the judge has no deadline"));
    Row(indent + 2, "judge attempts", std::to_string(d.attempts.value),
        OriginText(d.attempts.origin, d.attempts.line) +
            ", provider requests per failing turn");
    Row(indent + 2, "judge max_turns",
        OptText<int64_t>(d.max_turns.value, "no cap", IntText),
        OriginText(d.max_turns.origin, d.max_turns.line));
    Row(indent + 2, "judge budget",
        d.budget.value ? BudgetText(*d.budget.value) : "none",
        d.budget.value ? OriginText(d.budget.origin, d.budget.line)
                       : "not set");
  }

  // Each command tool the agent grants, with the limit a call of it gets:
  // its own `timeout:`, else the step's tool_timeout; the deadline bounds
  // both.
  void CommandToolRows(const AgentEntry& a, const ResolvedDials& d,
                       int indent) {
    for (const std::string& name : a.tools) {
      const ToolDef* t = plan_.pipeline().FindTool(name);
      if (t == nullptr) continue;
      std::string value, origin;
      if (t->timeout.has_value()) {
        value = (*t->timeout).count() > 0 ? Fmt(*t->timeout) : "none";
        origin = "the tool's timeout (line " + std::to_string(t->timeout.line) +
                 ")";
      } else {
        value = OptText<Millis>(d.tool_timeout.value, "none", Fmt);
        origin = "tool_timeout, the tool has no timeout of its own";
      }
      Row(indent, "tool " + name, value,
          origin + ", per call, never past the deadline");
    }
  }

  // What an MCP server is: the command steps runs, or the url it connects
  // to with the names of the headers it sends (their values may be
  // secrets).
  static std::string McpEndpointText(const McpServerDef& s) {
    if (s.url.empty()) return "runs `" + s.CommandText() + "`";
    std::string text = "connects to " + s.url;
    if (s.headers.empty()) return text;
    std::string names;
    for (const auto& [name, value] : s.headers) {
      names += (names.empty() ? "" : ", ") + name;
    }
    return text + " with headers " + names;
  }

  // Each MCP server the agent uses (docs/mcp.md): what it runs, what it
  // grants, how long its start may take (inside the deadline) and the limit
  // a call of its tools gets.
  void McpServerRows(const AgentEntry& a, const ResolvedDials& d, int indent) {
    std::vector<const McpServerDef*> servers;
    std::map<const McpServerDef*, std::string> grants;
    for (const std::string& entry : a.tools) {
      std::optional<McpGrant> g = plan_.pipeline().ParseMcpGrant(entry);
      if (!g || !g->server) continue;
      if (!grants.count(g->server)) servers.push_back(g->server);
      std::string& what = grants[g->server];
      if (what == "every tool") continue;
      what = g->tool.empty() ? "every tool"
                             : what + (what.empty() ? "" : ", ") + g->tool;
    }
    for (const McpServerDef* s : servers) {
      const Written<Millis>& st = s->startup_timeout;
      Row(indent, "mcp " + s->name, st.has_value() ? Fmt(*st) : "30s",
          (st.has_value()
               ? "startup_timeout (line " + std::to_string(st.line) + ")"
               : std::string("default startup_timeout")) +
              ", inside the deadline; " + McpEndpointText(*s) + " (line " +
              std::to_string(s->line) + "); grants " + grants[s]);
      std::string value, origin;
      if (s->tool_timeout.has_value()) {
        value = (*s->tool_timeout).count() > 0 ? Fmt(*s->tool_timeout) : "none";
        origin = "the server's tool_timeout (line " +
                 std::to_string(s->tool_timeout.line) + ")";
      } else {
        value = OptText<Millis>(d.tool_timeout.value, "none", Fmt);
        origin = "tool_timeout, the server has none of its own";
      }
      Row(indent, "mcp " + s->name + " calls", value,
          origin + ", per call, never past the deadline");
    }
  }

  // `what` names what the sandbox confines ("its script", "run_shell").
  static bool QueueOutsideTimeout(const ResolvedDials& d,
                                  const pipeline::Step& s) {
    return !s.is_container() && s.kind != StepKind::kAgent &&
           s.kind != StepKind::kGate && d.runner.value == RunnerKind::kSlurm &&
           !d.timeout_includes_queue.value;
  }

  // Where a task's, get's or put's scripts run; shown when they run on
  // Slurm or the file says where.
  void RunnerRows(const ResolvedDials& d, int indent) {
    if (d.runner.value == RunnerKind::kLocal &&
        d.runner.origin == DialOrigin::kPackageDefault)
      return;
    const bool slurm = d.runner.value == RunnerKind::kSlurm;
    Row(indent, "runner", RunnerName(d.runner.value),
        OriginText(d.runner.origin, d.runner.line) +
            (slurm ? ": each script is one Slurm job (docs/slurm.md)"
                   : ": on this machine"));
    if (!slurm) return;
    Row(indent + 2, "placement", PlacementText(d.slurm), "sbatch options");
    const Dial<bool>& q = d.timeout_includes_queue;
    Row(indent + 2, "queue time", q.value ? "counted" : "not counted",
        OriginText(q.origin, q.line) +
            (q.value ? ": the timeout runs from submission, queue included"
                     : ": the timeout starts when the job starts on a node; "
                       "the job's timeout counts the queue"));
    const Dial<bool>& l = d.retry_lost;
    Row(indent + 2, "lost attempts", l.value ? "retried" : "not retried",
        OriginText(l.origin, l.line) +
            (l.value ? ": a failed node or preemption uses another attempt"
                     : ": a failed node or preemption ends the step, "
                       "errored"));
  }

  void SandboxRow(int indent, const std::string& key,
                  const Dial<SandboxSpec>& d, const std::string& what) {
    std::string origin = OriginText(d.origin, d.line);
    origin += d.value.bwrap()
                  ? ": " + what +
                        " runs under bwrap, only its directory "
                        "writable"
                  : ": " + what + " runs with the user's own access";
    Row(indent, key, d.value.Describe(), origin);
  }

  void RetryRows(const pipeline::Step& s, const ResolvedStep& r, int indent) {
    const RetrySpec& rs = *s.retry;
    std::string schedule = BackoffName(rs.backoff);
    schedule +=
        rs.base_delay.count() ? " from " + Fmt(rs.base_delay) : ", no wait";
    if (rs.max_delay) schedule += ", each wait at most " + Fmt(*rs.max_delay);
    Row(indent, "retry", schedule,
        "retry block (line " + std::to_string(rs.line) + ")");
    if (!r.retry_waits.empty()) {
      std::string waits;
      for (size_t i = 0; i < r.retry_waits.size(); ++i) {
        waits += (i ? ", " : "") + Fmt(r.retry_waits[i]) + " before attempt " +
                 std::to_string(i + 2);
      }
      Row(indent + 2, "waits", waits, "");
    }
    Row(indent + 2, "on_timeout", rs.on_timeout ? "retried" : "not retried",
        rs.on_timeout ? "a timed-out attempt is tried again (idempotent)"
                      : "an expired attempt ends the step");
    if (r.total_timeout) {
      Row(indent + 2, "total_timeout", Fmt(*r.total_timeout),
          "all attempts and waits together; the last attempt is cut to what "
          "remains");
    }
  }

  void ContainerRows(const pipeline::Step& s, int indent) {
    if (s.kind == StepKind::kInParallel) {
      Row(indent, "limit",
          s.limit.has_value() ? std::to_string(*s.limit) : "none",
          s.limit.has_value() ? "step" : "all branches at once");
      Row(indent, "fail_fast", s.fail_fast ? "yes" : "no", "");
    } else if (s.kind == StepKind::kAcross) {
      size_t cells = 1;
      for (const AcrossVar& v : s.across) {
        cells *= v.values.size();
        Row(indent, "var " + v.var, std::to_string(v.values.size()) + " values",
            v.max_in_flight.has_value()
                ? "max_in_flight " + std::to_string(*v.max_in_flight)
                : "all at once");
      }
      Row(indent, "cells", std::to_string(cells), "");
      const ResolvedDials& d = plan_.For(s).dials;
      if (d.runner.origin != DialOrigin::kPackageDefault) {
        const bool slurm = d.runner.value == RunnerKind::kSlurm;
        Row(indent, "runner", RunnerName(d.runner.value),
            OriginText(d.runner.origin, d.runner.line) +
                (slurm ? ": each cell is one Slurm job running steps on a "
                         "node, every step of it there; the queue counts "
                         "against the job's timeout only (docs/slurm.md)"
                       : ": the cells run here"));
        if (slurm) {
          Row(indent + 2, "placement", PlacementText(d.slurm),
              "sbatch options");
        }
      }
      if (s.budget) {
        Row(indent, "budget", BudgetText(*s.budget),
            "degrades: stops admitting cells once spent");
      }
    }
  }

  const ResolvedPlan& plan_;
  const pipeline::Job* job_ = nullptr;  // The job being printed.
  std::ostringstream out_;
};

}  // namespace

Bound StepBound(const ResolvedPlan& plan, const Step& s) {
  return StepBoundIn(BoundContext{plan}, s);
}

Bound StepBound(const ResolvedPlan& plan, const Job& job, const Step& s) {
  const BoundContext c = ContextOf(plan, job);
  return UnderJobDeadline(StepBoundIn(c, s), c, job, {&s});
}

Bound JobBound(const ResolvedPlan& plan, const Job& job) {
  const BoundContext c = ContextOf(plan, job);
  std::vector<const Step*> steps;
  for (const StepPtr& s : job.plan) steps.push_back(s.get());
  Bound body = UnderJobDeadline(Sequence(job.plan, c), c, job, steps);
  if (!body.bounded() && job.timeout.has_value()) {
    body.why +=
        " (the job's timeout is checked between steps and cannot cut it "
        "short)";
  }
  return WithHooks(std::move(body), job.hooks, c);
}

std::string Explain(const ResolvedPlan& plan,
                    const std::vector<std::string>& jobs) {
  Printer printer(plan);
  for (const Job& job : plan.pipeline().jobs) {
    if (!jobs.empty() &&
        std::find(jobs.begin(), jobs.end(), job.name) == jobs.end())
      continue;
    printer.Job(job);
  }
  return printer.str();
}

}  // namespace steps::pipeline
