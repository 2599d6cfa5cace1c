// Reading steps: the nine kinds, their keys, and the spec's refusals and
// warnings about attempts, timeouts and the retry block.
#include <algorithm>
#include <cctype>

#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {
namespace {

constexpr const char* kKindKeys[] = {"task",  "get",  "put",
                                     "agent", "gate", "in_parallel",
                                     "do",    "try",  "across"};
constexpr const char* kKindList =
    "task, get, put, agent, gate, in_parallel, do, try or across";

const char* Article(StepKind k) {
  return (k == StepKind::kAgent || k == StepKind::kInParallel ||
          k == StepKind::kAcross)
             ? "an "
             : "a ";
}

std::string Describe(StepKind k) {
  return std::string(Article(k)) + StepKindName(k) + " step";
}

int PositiveInt(const YAML::Node& n, const std::string& key, Diagnostics& d) {
  auto v = ReadInt(n, key, 1, 1000000, "a positive integer", d);
  return v ? static_cast<int>(*v) : 0;
}

void ReadRetry(const YAML::Node& n, Step& step, Diagnostics& d) {
  RetrySpec rs;
  rs.line = LineOf(n);
  if (!n.IsMap()) {
    d.Error(
        rs.line,
        "'retry' must be a mapping of max_attempts, backoff, base_delay_ms, "
        "max_delay_ms, on_timeout and total_timeout_seconds");
    return;
  }
  MapReader r(n, "retry", d);
  if (YAML::Node v = r.Take("max_attempts"); v.IsDefined()) {
    rs.max_attempts.line = r.KeyLine("max_attempts");
    if (int a = PositiveInt(v, "retry.max_attempts", d))
      rs.max_attempts.value = a;
  }
  if (auto b = ReadString(r.Take("backoff"), "retry.backoff", d)) {
    if (*b == "fixed") {
      rs.backoff = Backoff::kFixed;
    } else if (*b == "linear") {
      rs.backoff = Backoff::kLinear;
    } else if (*b == "exponential") {
      rs.backoff = Backoff::kExponential;
    } else {
      d.Error(
          r.KeyLine("backoff"),
          "'retry.backoff' must be 'fixed', 'linear', or 'exponential' (got '" +
              *b + "')");
    }
  }
  if (auto v = ReadNumber(r.Take("base_delay_ms"), "retry.base_delay_ms", 0,
                          "a non-negative number", d)) {
    rs.base_delay = Millis(static_cast<int64_t>(std::min(*v, 1e12)));
  }
  if (YAML::Node v = r.Take("max_delay_ms"); v.IsDefined()) {
    // A cap of 0 would silently make every wait 0: refused, since omitting
    // the key already means "no cap" (spec text 000's default).
    if (auto ms =
            ReadNumber(v, "retry.max_delay_ms", 0, "a positive number", d)) {
      if (*ms < 1) {
        d.Error(LineOf(v),
                "'retry.max_delay_ms' must be a positive number (got " +
                    v.as<std::string>() +
                    ") — a cap of 0 would make every wait 0; omit "
                    "'max_delay_ms' for no cap, or drop 'base_delay_ms' "
                    "for no wait");
      } else {
        rs.max_delay = Millis(static_cast<int64_t>(std::min(*ms, 1e12)));
      }
    }
  }
  if (YAML::Node v = r.Take("on_timeout"); v.IsDefined()) {
    rs.on_timeout_line = r.KeyLine("on_timeout");
    if (auto b = ReadBool(v, "retry.on_timeout", d)) rs.on_timeout = *b;
  }
  if (YAML::Node v = r.Take("total_timeout_seconds"); v.IsDefined()) {
    rs.total_timeout.line = r.KeyLine("total_timeout_seconds");
    if (int s = PositiveInt(v, "retry.total_timeout_seconds", d)) {
      rs.total_timeout.value = Millis(int64_t{s} * 1000);
    }
  }
  // The spec's own wording for an unknown retry key.
  for (const std::string& key : r.Untaken()) {
    int line = r.KeyLine(key);
    d.Warn(line, "unknown key '" + key + "' (line " + std::to_string(line) +
                     ") — ignored (not a recognized retry field).");
    r.Take(key);
  }
  step.retry = rs;
}

// The step's own `timeout:`. Zero is "no deadline" on an agent and refused
// elsewhere (spec text 002, "Zero means no limit").
void ReadStepTimeout(MapReader& r, Step& step, Diagnostics& d) {
  YAML::Node n = r.Take("timeout");
  if (!n.IsDefined()) return;
  step.timeout.line = r.KeyLine("timeout");
  if (step.is_container()) {
    d.Error(step.timeout.line,
            "'timeout' applies to task, get, put and agent steps; the "
            "steps inside " +
                Describe(step.kind) + " carry their own");
    return;
  }
  auto v = ReadDuration(n, "timeout", std::nullopt, d);
  if (!v) return;
  if (v->count() < 0) {
    d.Error(step.timeout.line,
            "'timeout' must not be negative" +
                std::string(step.kind == StepKind::kAgent
                                ? " (write \"0\" for no deadline)"
                                : ""));
    return;
  }
  if (v->count() == 0 && step.kind != StepKind::kAgent) {
    d.Error(step.timeout.line, "'timeout' must be a positive duration on " +
                                   Describe(step.kind) + " — " +
                                   "without 'timeout' it has no deadline, so 0 "
                                   "says nothing the empty field "
                                   "doesn't; omit it for no deadline");
    return;
  }
  step.timeout.value = *v;
}

void ReadFix(const YAML::Node& n, Step& step, Diagnostics& d) {
  if (!n.IsDefined()) return;
  FixSpec f;
  f.line = LineOf(n);
  if (n.IsScalar()) {
    f.agent = n.Scalar();
  } else if (n.IsMap()) {
    MapReader r(n, "'fix'", d);
    if (auto a = ReadString(r.Take("agent"), "fix.agent", d)) f.agent = *a;
    if (YAML::Node v = r.Take("attempts"); v.IsDefined()) {
      f.attempts.line = r.KeyLine("attempts");
      if (int a = PositiveInt(v, "fix.attempts", d)) f.attempts.value = a;
    }
    r.Finish();
  } else {
    d.Error(f.line,
            "'fix' must name an agent, or be { agent: NAME, attempts: N }");
    return;
  }
  if (f.agent.empty()) {
    d.Error(f.line, "'fix' names no agent");
    return;
  }
  step.fix = f;
}

void ReadAcross(const YAML::Node& n, Step& step, Diagnostics& d) {
  if (!n.IsSequence() || n.size() == 0) {
    d.Error(LineOf(n),
            "'across' must be a list of { var, values, max_in_flight }");
    return;
  }
  for (const YAML::Node& item : n) {
    if (!item.IsMap()) {
      d.Error(LineOf(item),
              "each entry of 'across' must be { var, values, max_in_flight }");
      continue;
    }
    MapReader r(item, "an across variable", d);
    AcrossVar v;
    v.line = LineOf(item);
    if (auto name = ReadString(r.Take("var"), "across.var", d)) v.var = *name;
    if (v.var.empty()) d.Error(v.line, "across variable has no 'var' name");
    YAML::Node values = r.Take("values");
    if (!values.IsDefined()) {
      d.Error(v.line, "across variable '" + v.var + "' has no 'values'");
    } else if (auto list = ReadStringList(values, "across.values", d)) {
      v.values = *list;
    }
    if (YAML::Node m = r.Take("max_in_flight"); m.IsDefined()) {
      v.max_in_flight.line = r.KeyLine("max_in_flight");
      if (int x = PositiveInt(m, "max_in_flight", d)) v.max_in_flight.value = x;
    }
    r.Finish();
    for (const AcrossVar& other : step.across) {
      if (!v.var.empty() && other.var == v.var) {
        d.Error(v.line, "duplicate across variable '" + v.var + "'");
      }
    }
    step.across.push_back(std::move(v));
  }
}

void ReadInParallel(const YAML::Node& n, Step& step, StepContext ctx) {
  if (n.IsSequence()) {
    step.steps = ReadStepList(n, "in_parallel", ctx);
    return;
  }
  if (!n.IsMap()) {
    ctx.diags.Error(LineOf(n),
                    "'in_parallel' must be a list of steps, or "
                    "{ steps, limit, fail_fast }");
    return;
  }
  MapReader r(n, "'in_parallel'", ctx.diags);
  YAML::Node steps = r.Take("steps");
  if (!steps.IsDefined()) {
    ctx.diags.Error(LineOf(n), "'in_parallel' has no 'steps'");
  } else {
    step.steps = ReadStepList(steps, "in_parallel.steps", ctx);
  }
  if (YAML::Node l = r.Take("limit"); l.IsDefined()) {
    step.limit.line = r.KeyLine("limit");
    if (int x = PositiveInt(l, "limit", ctx.diags)) step.limit.value = x;
  }
  if (auto ff = ReadBool(r.Take("fail_fast"), "fail_fast", ctx.diags))
    step.fail_fast = *ff;
  r.Finish();
}

void ReadAgentDials(MapReader& r, Step& step, Diagnostics& d) {
  for (auto [key, dial] :
       {std::pair{"max_turns", &step.max_turns},
        std::pair{"max_context_bytes", &step.max_context_bytes}}) {
    if (YAML::Node v = r.Take(key); v.IsDefined()) {
      dial->line = r.KeyLine(key);
      dial->value = ReadInt(
          v, key, 0, int64_t{1} << 50,
          "0 (no cap) or a positive integer; negative values are refused", d);
    }
  }
  for (auto [key, dial] : {std::pair{"llm_timeout", &step.llm_timeout},
                           std::pair{"tool_timeout", &step.tool_timeout}}) {
    if (YAML::Node v = r.Take(key); v.IsDefined()) {
      dial->line = r.KeyLine(key);
      auto t = ReadDuration(v, key, std::nullopt, d);
      if (t && t->count() < 0) {
        d.Error(dial->line, std::string("'") + key + "' must not be negative");
      } else if (t) {
        dial->value = *t;
      }
    }
  }
  step.budget = ReadBudget(r.Take("budget"), "budget", d);
  if (auto m = ReadStringList(r.Take("messages"), "messages", d))
    step.messages = *m;
  if (auto c = ReadStringList(r.Take("context_paths"), "context_paths", d)) {
    step.context_paths = *c;
  }
}

// Checks that need the whole step: attempts vs retry, the spec's warnings.
void CheckRetryRules(MapReader& r, Step& step, StepContext ctx) {
  Diagnostics& d = ctx.diags;
  // attempts: re-runs a task, get or put like retry: does; on an agent it
  // retries one model request inside the single run, so it stays allowed.
  if (ctx.in_ensure && step.attempts.has_value() &&
      step.kind != StepKind::kAgent && !step.is_container()) {
    d.Error(step.attempts.line,
            "'attempts' is refused on an 'ensure' hook step — ensure runs "
            "exactly once, whatever happened; retry the steps it cleans up "
            "after instead");
  }
  if (!step.retry) return;
  const RetrySpec& rs = *step.retry;
  int retry_line = r.KeyLine("retry");
  if (ctx.in_ensure) {
    d.Error(
        retry_line,
        "'retry' is refused on an 'ensure' hook step — ensure runs exactly "
        "once, whatever happened; retry the steps it cleans up after instead");
    return;
  }
  if (step.is_container() || step.kind == StepKind::kGate) {
    d.Error(retry_line,
            "'retry' applies to task, get and put steps, not to " +
                Describe(step.kind) +
                (step.kind == StepKind::kGate
                     ? ": a gate is decided once; give it a 'timeout' and an "
                       "'on_failure' hook instead"
                     : "; put it on the steps inside"));
    return;
  }
  if (step.kind == StepKind::kAgent) {
    d.Warn(retry_line,
           "'retry' is inert on agent steps — an agent retries each failing "
           "model request through 'attempts' and never restarts the "
           "conversation; remove 'retry'");
    return;
  }
  if (step.attempts.has_value() && rs.max_attempts.has_value()) {
    d.Error(step.attempts.line,
            "both 'attempts' and 'retry.max_attempts' are set — they "
            "are the same dial; keep one");
  }
  if (rs.on_timeout && !step.idempotent) {
    d.Error(rs.on_timeout_line,
            "Step '" + step.name +
                "': 'retry.on_timeout: true' requires 'idempotent: true' "
                "declared on the step — a timeout-retry can run concurrently "
                "with the "
                "still-in-flight original attempt, so the step must explicitly "
                "attest that any "
                "partial prior application is harmless to re-apply. Declare "
                "'idempotent: true' "
                "or remove 'on_timeout'.");
  }
  if (!step.timeout.has_value()) {
    d.Warn(retry_line, "Step '" + step.name +
                           "' declares 'retry' but no 'timeout' — each "
                           "attempt is unbounded, since task, get and put "
                           "steps have no default "
                           "timeout; set 'timeout' to bound each attempt");
  } else if (rs.total_timeout.has_value() &&
             *rs.total_timeout <= *step.timeout) {
    d.Warn(rs.total_timeout.line,
           "'retry.total_timeout_seconds: " +
               std::to_string(rs.total_timeout.value->count() / 1000) +
               "' is at or below its per-attempt timeout (" +
               FormatDuration(*step.timeout) +
               ") — each attempt is bounded by what remains of the cap, so the "
               "per-attempt "
               "timeout never takes effect");
  }
}

}  // namespace

std::optional<Budget> ReadBudget(const YAML::Node& n, const std::string& key,
                                 Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  if (!n.IsMap()) {
    d.Error(LineOf(n), "'" + key + "' must be { tokens: N, usd: X }");
    return std::nullopt;
  }
  MapReader r(n, "'" + key + "'", d);
  Budget b;
  b.line = LineOf(n);
  b.tokens = ReadInt(r.Take("tokens"), key + ".tokens", 0, int64_t{1} << 50,
                     "0 (no limit) or a positive integer", d);
  b.usd = ReadNumber(r.Take("usd"), key + ".usd", 0,
                     "0 (no limit) or a positive number", d);
  if (!r.Has("tokens") && !r.Has("usd")) {
    d.Error(b.line, "'" + key + "' sets neither 'tokens' nor 'usd'");
  }
  r.Finish();
  return b;
}

void ReadHooks(MapReader& r, Hooks& hooks, StepContext ctx) {
  for (HookKind k : kAllHooks) {
    YAML::Node n = r.Take(HookKindName(k));
    if (!n.IsDefined()) continue;
    StepContext hook_ctx = ctx;
    if (k == HookKind::kEnsure) hook_ctx.in_ensure = true;
    if (!n.IsMap()) {
      ctx.diags.Error(
          LineOf(n),
          std::string("'") + HookKindName(k) +
              "' must be one step (a mapping such as { task: notify, "
              "run: ... }); wrap several in 'do:'");
      continue;
    }
    hooks.Get(k) = ReadStep(n, hook_ctx);
  }
}

std::vector<StepPtr> ReadStepList(const YAML::Node& node,
                                  const std::string& key, StepContext ctx) {
  std::vector<StepPtr> out;
  if (!node.IsSequence()) {
    ctx.diags.Error(
        LineOf(node),
        "'" + key + "' must be a list of steps, not " + DescribeNodeType(node));
    return out;
  }
  for (const YAML::Node& item : node) {
    if (StepPtr s = ReadStep(item, ctx)) out.push_back(std::move(s));
  }
  return out;
}

namespace {

// The one kind key of a step (`across` carries its body in `do`), or
// nullopt after an error: none, or two.
std::optional<std::string> KindKeyOf(const YAML::Node& node, MapReader& r,
                                     int line, Diagnostics& d) {
  std::vector<std::string> kinds;
  for (const char* k : kKindKeys) {
    if (node[k].IsDefined()) kinds.push_back(k);
  }
  if (std::find(kinds.begin(), kinds.end(), "across") != kinds.end()) {
    kinds = {"across"};
  }
  if (kinds.empty()) {
    std::string found;
    for (const std::string& k : r.Untaken())
      found += (found.empty() ? "'" : ", '") + k + "'";
    d.Error(line, std::string("a step needs one of ") + kKindList +
                      (found.empty() ? "" : " (found " + found + ")"));
    return std::nullopt;
  }
  if (kinds.size() > 1) {
    d.Error(line, "a step has both '" + kinds[0] + "' and '" + kinds[1] +
                      "' — a step does one thing; split it in two");
    return std::nullopt;
  }
  return kinds[0];
}

StepKind KindNamed(const std::string& kind) {
  static const std::pair<const char*, StepKind> kKinds[] = {
      {"task", StepKind::kTask},    {"get", StepKind::kGet},
      {"put", StepKind::kPut},      {"agent", StepKind::kAgent},
      {"gate", StepKind::kGate},    {"in_parallel", StepKind::kInParallel},
      {"do", StepKind::kDo},        {"try", StepKind::kTry},
      {"across", StepKind::kAcross}};
  for (auto& [name, k] : kKinds) {
    if (kind == name) return k;
  }
  return StepKind::kTask;  // KindKeyOf returns only the names above.
}

// What the kind key holds: the name of a task, get, put or agent step, or
// the steps of a container (with an across's own keys).
void ReadKindValue(const std::string& kind, const YAML::Node& kind_node,
                   MapReader& typed, Step& step, StepContext& ctx) {
  Diagnostics& d = ctx.diags;
  switch (step.kind) {
    case StepKind::kTask:
    case StepKind::kGet:
    case StepKind::kPut:
    case StepKind::kAgent:
    case StepKind::kGate: {
      auto v = ReadName(kind_node, kind, d);
      if (v && v->empty()) d.Error(step.line, "'" + kind + "' needs a name");
      std::string target = v.value_or("");
      if (step.kind == StepKind::kAgent) {
        step.agent = target;
      } else if (step.kind != StepKind::kTask) {
        step.resource = target;
      }
      step.name = target;
      break;
    }
    case StepKind::kDo:
      step.steps = ReadStepList(kind_node, "do", ctx);
      break;
    case StepKind::kTry:
      if (StepPtr inner =
              kind_node.IsMap() ? ReadStep(kind_node, ctx) : nullptr) {
        step.steps.push_back(inner);
      } else if (!kind_node.IsMap()) {
        d.Error(LineOf(kind_node), "'try' must be one step (a mapping)");
      }
      break;
    case StepKind::kInParallel:
      ReadInParallel(kind_node, step, ctx);
      break;
    case StepKind::kAcross: {
      ReadAcross(kind_node, step, d);
      YAML::Node body = typed.Take("do");
      if (!body.IsDefined()) {
        d.Error(step.line,
                "'across' needs a 'do:' list of steps to run for each cell");
      } else {
        step.steps = ReadStepList(body, "do", ctx);
      }
      if (auto ff = ReadBool(typed.Take("fail_fast"), "fail_fast", d))
        step.fail_fast = *ff;
      step.budget = ReadBudget(typed.Take("budget"), "budget", d);
      break;
    }
  }
}

// The keys every step kind takes.
void ReadCommonKeys(MapReader& typed, Step& step, StepContext& ctx) {
  Diagnostics& d = ctx.diags;
  if (YAML::Node v = typed.Take("attempts"); v.IsDefined()) {
    step.attempts.line = typed.KeyLine("attempts");
    if (step.is_container() || step.kind == StepKind::kGate) {
      d.Error(step.attempts.line,
              "'attempts' applies to task, get, put and agent steps, "
              "not to " +
                  Describe(step.kind) +
                  (step.kind == StepKind::kGate
                       ? ": a gate is decided once; give it a 'timeout' and "
                         "an 'on_failure' hook instead"
                       : ""));
    } else if (int a = PositiveInt(v, "attempts", d)) {
      step.attempts.value = a;
    }
  }
  ReadStepTimeout(typed, step, d);
  ReadStepSandbox(typed, step, d);
  ReadStepRunner(typed, step, d);
  if (YAML::Node v = typed.Take("retry"); v.IsDefined()) {
    ReadRetry(v, step, d);
    if (step.retry) step.retry->line = typed.KeyLine("retry");
  }
  if (auto b = ReadBool(typed.Take("idempotent"), "idempotent", d))
    step.idempotent = *b;
  ReadHooks(typed, step.hooks, ctx);
  ReadStepAssert(typed.Take("assert"), step, d);
  if (auto to = ReadString(typed.Take("to"), "to", d)) {
    step.route_to = *to;
    step.route_to_line = typed.KeyLine("to");
  }
}

// A gate's keys: the message for the approver, who may decide, and what
// its expiry decides. OS user names are letters, digits, '.', '_' and '-'.
void ReadGateKeys(MapReader& typed, Step& step, Diagnostics& d) {
  GateSpec g;
  if (auto m = ReadString(typed.Take("message"), "message", d)) g.message = *m;
  if (YAML::Node a = typed.Take("approvers"); a.IsDefined()) {
    g.approvers_line = typed.KeyLine("approvers");
    if (auto names = ReadStringList(a, "approvers", d)) {
      for (const std::string& name : *names) {
        const bool ok = !name.empty() && name.size() <= 64 &&
                        std::all_of(name.begin(), name.end(), [](char c) {
                          return std::isalnum(static_cast<unsigned char>(c)) ||
                                 c == '.' || c == '_' || c == '-';
                        });
        if (!ok) {
          d.Error(g.approvers_line,
                  "'approvers' holds OS user names (letters, digits, '.', "
                  "'_' and '-'), not '" +
                      name + "'");
        }
      }
      if (names->empty()) {
        d.Error(g.approvers_line,
                "'approvers' is empty, so nobody could decide the gate; "
                "name the users who may, or omit it to let anyone");
      }
      g.approvers = *names;
    }
  }
  if (auto v = ReadString(typed.Take("default"), "default", d)) {
    g.default_line = typed.KeyLine("default");
    if (*v == "approve") {
      g.on_expiry = GateDecision::kApprove;
    } else if (*v == "reject") {
      g.on_expiry = GateDecision::kReject;
    } else {
      d.Error(g.default_line,
              "'default' is what the gate decides when its "
              "timeout passes: approve or reject, not '" +
                  *v + "'");
    }
    if (step.timeout.line == 0) {
      d.Error(g.default_line,
              "'default' applies when the gate's 'timeout' passes, and this "
              "gate has none; give it a 'timeout'");
    }
  }
  step.gate = std::move(g);
}

// The keys of one kind: a task's script, inputs, outputs, env and fix; a
// get's or put's params; an agent step's dials.
void ReadKindKeys(MapReader& typed, Step& step, Diagnostics& d) {
  if (step.kind == StepKind::kTask) {
    YAML::Node run = typed.Take("run");
    if (!run.IsDefined()) {
      d.Error(step.line,
              "task '" + step.name + "' has no 'run' (the bash script to run)");
    } else if (auto s = ReadString(run, "run", d)) {
      step.run = *s;
      step.run_line = typed.KeyLine("run");
    }
    if (auto v = ReadStringList(typed.Take("inputs"), "inputs", d))
      step.inputs = *v;
    if (auto v = ReadStringList(typed.Take("outputs"), "outputs", d))
      step.outputs = *v;
    if (auto v = ReadEnv(typed.Take("env"), "env", d)) step.env = *v;
    ReadFix(typed.Take("fix"), step, d);
  }
  if (step.kind == StepKind::kGet || step.kind == StepKind::kPut) {
    if (YAML::Node p = typed.Take("params"); p.IsDefined() && !p.IsNull()) {
      if (!p.IsMap()) {
        d.Error(LineOf(p), "'params' must be a mapping");
      } else if (auto j = ReadJson(p, "params", d)) {
        step.params = *j;
      }
    }
  }
  if (step.kind == StepKind::kAgent) {
    ReadAgentDials(typed, step, d);
    if (step.messages.empty() && !typed.Has("messages")) {
      d.Error(step.line,
              "agent step '" + step.name + "' has no 'messages' (what to ask)");
    }
  }
  if (step.kind == StepKind::kGate) ReadGateKeys(typed, step, d);
}

// A key of another kind gets a pointed message, not just "unknown".
void WarnOtherKindsKeys(MapReader& typed, const Step& step, Diagnostics& d) {
  static const std::pair<const char*, const char*> kOwners[] = {
      {"run", "task"},          {"inputs", "task"},
      {"outputs", "task"},      {"env", "task"},
      {"fix", "task"},          {"params", "get and put"},
      {"messages", "agent"},    {"context_paths", "agent"},
      {"max_turns", "agent"},   {"max_context_bytes", "agent"},
      {"llm_timeout", "agent"}, {"tool_timeout", "agent"},
      {"message", "gate"},      {"approvers", "gate"},
      {"default", "gate"},      {"limit", "in_parallel"}};
  for (const std::string& key : typed.Untaken()) {
    for (auto& [k, owner] : kOwners) {
      if (key == k) {
        d.Warn(typed.KeyLine(key), "'" + key + "' belongs to " + owner +
                                       " steps; on " + Describe(step.kind) +
                                       " it is ignored");
        typed.Take(key);
      }
    }
  }
}

}  // namespace

StepPtr ReadStep(const YAML::Node& node, StepContext ctx) {
  Diagnostics& d = ctx.diags;
  if (!node.IsMap()) {
    d.Error(LineOf(node), std::string("a step must be a mapping with one of ") +
                              kKindList + ", not " + DescribeNodeType(node));
    return nullptr;
  }
  auto step = std::make_shared<Step>();
  step->line = LineOf(node);
  StepScope scope(d, step->line);
  MapReader r(node, "a step", d);
  const std::optional<std::string> kind = KindKeyOf(node, r, step->line, d);
  if (!kind) return nullptr;
  YAML::Node kind_node = r.Take(*kind);
  step->kind = KindNamed(*kind);
  MapReader& typed = r;
  typed.set_what(Describe(step->kind));
  ReadKindValue(*kind, kind_node, typed, *step, ctx);
  if (auto name = ReadName(typed.Take("name"), "name", d)) {
    if (name->empty()) {
      d.Error(typed.KeyLine("name"), "'name' must not be empty");
    } else {
      step->name = *name;
    }
  }
  if (step->name.empty()) step->name = *kind;
  ReadCommonKeys(typed, *step, ctx);
  ReadKindKeys(typed, *step, d);
  CheckRetryRules(typed, *step, ctx);
  WarnOtherKindsKeys(typed, *step, d);
  typed.Finish();
  return step;
}

}  // namespace steps::pipeline::internal
