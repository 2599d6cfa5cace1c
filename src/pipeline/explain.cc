#include "pipeline/explain.h"

#include <algorithm>
#include <sstream>

namespace steps::pipeline {
namespace {

std::string Fmt(Millis d) { return FormatDuration(d); }

Bound Unbounded(std::string why) { return Bound{std::nullopt, std::move(why)}; }

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
    sum += *b.value;
    longest = std::max(longest, *b.value);
  }
  if (limit >= bounds.size()) {
    return Bound{longest, std::to_string(bounds.size()) + " " + what +
                              " at once: the longest of them"};
  }
  Millis spread = Millis(sum.count() / static_cast<int64_t>(limit)) + longest;
  Millis v = std::min(sum, spread);
  return Bound{v, std::to_string(bounds.size()) + " " + what + ", " +
                      std::to_string(limit) + " at a time: at most total/" +
                      std::to_string(limit) + " + longest"};
}

Bound Sequence(const std::vector<StepPtr>& steps, const ResolvedPlan& plan) {
  Millis sum(0);
  for (const StepPtr& s : steps) {
    Bound b = StepBound(plan, *s);
    if (!b.bounded())
      return Unbounded("step '" + s->name + "' is unbounded: " + b.why);
    sum += *b.value;
  }
  return Bound{sum, "the sum of its steps"};
}

Bound WorkBound(const ResolvedPlan& plan, const Step& s) {
  const ResolvedStep& r = plan.For(s);
  if (s.kind == StepKind::kAgent) {
    if (!r.agent) return Unbounded("unknown agent");
    if (!r.dials.timeout.value) {
      return Unbounded(
          "timeout \"0\": no deadline; only budget, max_turns and loop "
          "detection bound the conversation");
    }
    return Bound{*r.dials.timeout.value,
                 "the deadline covers every request, retry wait, "
                 "tool call and fallback source"};
  }
  const int n = r.dials.attempts.value;
  if (!r.dials.timeout.value) {
    std::string why = std::string(StepKindName(s.kind)) +
                      " steps have no default timeout and this one sets none";
    if (r.total_timeout) {
      return Bound{*r.total_timeout,
                   "each attempt unbounded, but retry.total_timeout_seconds "
                   "caps all attempts together"};
    }
    return Unbounded(why);
  }
  Millis t = *r.dials.timeout.value;
  Millis per_attempt = t;
  std::string how = std::to_string(n) + " × " + Fmt(t);
  if (r.fix_dials) {
    if (!r.fix_dials->timeout.value) {
      return Unbounded("its fixer '" + s.fix->agent + "' has no deadline");
    }
    per_attempt = 2 * t + *r.fix_dials->timeout.value;
    how = std::to_string(n) + " × (" + Fmt(t) + " + fixer " +
          Fmt(*r.fix_dials->timeout.value) + " + re-run " + Fmt(t) + ")";
  }
  Millis total = per_attempt * n;
  Millis waits(0);
  for (Millis w : r.retry_waits) waits += w;
  if (waits.count() > 0) how += " + waits " + Fmt(waits);
  total += waits;
  if (r.total_timeout && *r.total_timeout < total) {
    return Bound{
        *r.total_timeout,
        how + " = " + Fmt(total) + ", capped by retry.total_timeout_seconds"};
  }
  return Bound{total, how};
}

Bound WithHooks(Bound body, const Hooks& hooks, const ResolvedPlan& plan) {
  if (!body.bounded()) return body;
  Millis worst_outcome_hook(0);
  for (HookKind k : {HookKind::kOnSuccess, HookKind::kOnFailure,
                     HookKind::kOnError, HookKind::kOnAbort}) {
    if (!hooks.Get(k)) continue;
    Bound b = StepBound(plan, *hooks.Get(k));
    if (!b.bounded()) {
      return Unbounded(std::string("its ") + HookKindName(k) +
                       " hook is unbounded: " + b.why);
    }
    worst_outcome_hook = std::max(worst_outcome_hook, *b.value);
  }
  Millis ensure(0);
  if (hooks.ensure) {
    Bound b = StepBound(plan, *hooks.ensure);
    if (!b.bounded())
      return Unbounded("its ensure hook is unbounded: " + b.why);
    ensure = *b.value;
  }
  if (worst_outcome_hook.count() == 0 && ensure.count() == 0) return body;
  return Bound{*body.value + worst_outcome_hook + ensure,
               body.why + ", plus its hooks"};
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
                  "); checked between steps, never during one; hooks "
                  "run past it, each bounded by its own timeout"
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
      AgentDials(r.dials, indent);
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
    if (!r.identity.empty())
      Row(indent, "identity", r.identity.substr(0, 8), "cache key");
    Bound b = StepBound(plan_, s);
    Row(indent, "bound", b.bounded() ? Fmt(*b.value) : "unbounded", b.why);
    int i = 1;
    for (const StepPtr& child : s.steps) {
      Step(*child, indent + 4, std::to_string(i++) + ".");
    }
    for (HookKind k : kAllHooks) {
      if (s.hooks.Get(k)) Step(*s.hooks.Get(k), indent + 4, HookKindName(k));
    }
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

  // `what` names what the sandbox confines ("its script", "run_shell").
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
      if (s.budget) {
        Row(indent, "budget", BudgetText(*s.budget),
            "degrades: stops admitting cells once spent");
      }
    }
  }

  const ResolvedPlan& plan_;
  std::ostringstream out_;
};

}  // namespace

Bound StepBound(const ResolvedPlan& plan, const Step& s) {
  Bound body;
  switch (s.kind) {
    case StepKind::kTask:
    case StepKind::kGet:
    case StepKind::kPut:
    case StepKind::kAgent:
      body = WorkBound(plan, s);
      break;
    case StepKind::kDo:
    case StepKind::kTry:
      body = Sequence(s.steps, plan);
      break;
    case StepKind::kInParallel: {
      std::vector<Bound> branches;
      for (const StepPtr& c : s.steps) branches.push_back(StepBound(plan, *c));
      size_t limit =
          s.limit.has_value() ? static_cast<size_t>(*s.limit) : branches.size();
      body = Parallel(branches, std::max<size_t>(limit, 1), "branches");
      break;
    }
    case StepKind::kAcross: {
      Bound cell = Sequence(s.steps, plan);
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
  return WithHooks(std::move(body), s.hooks, plan);
}

Bound JobBound(const ResolvedPlan& plan, const Job& job) {
  Millis sum(0), longest(0);
  std::optional<std::string> unbounded;
  for (const StepPtr& s : job.plan) {
    Bound b = StepBound(plan, *s);
    if (!b.bounded()) {
      unbounded = "step '" + s->name + "' is unbounded: " + b.why;
      break;
    }
    sum += *b.value;
    longest = std::max(longest, *b.value);
  }
  Bound body;
  if (unbounded) {
    body = Unbounded(*unbounded);
    if (job.timeout.has_value()) {
      body.why +=
          " (the job's timeout is checked between steps and cannot cut it "
          "short)";
    }
  } else if (job.timeout.has_value() && *job.timeout + longest < sum) {
    body = Bound{*job.timeout + longest,
                 "the job timeout " + Fmt(*job.timeout) +
                     " plus the longest step " + Fmt(longest) +
                     ", since the step running at the deadline finishes"};
  } else {
    body = Bound{sum, "the sum of its steps"};
  }
  return WithHooks(std::move(body), job.hooks, plan);
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
