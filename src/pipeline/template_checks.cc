// Load-time checks of template expressions. Each place a template is
// rendered has its own values and its own danger:
//   task `run:`       across vars; run by bash, so every value is quoted
//   agent messages    across vars; plain text, any pipe
//   resource scripts  .source, .params, .version (`in` only) and across
//                     vars; run by bash, so every value is quoted
// Whatever would fail or misbehave at run time (a value that is never set,
// an unknown pipe, an unquoted value in a shell script) is refused here.
#include <set>

#include "pipeline/loader_internal.h"
#include "pipeline/template.h"

namespace steps::pipeline::internal {
namespace {

// Where a text is rendered.
struct Place {
  std::string what;  // "task 'build' run", "resource type 'git' check"
  int line = 0;      // The line of the key holding the text.
  bool shell = false;
  bool mixed = false;  // Braces that are not ours are left to the text.
  bool values = true;  // Check the values named (else syntax and quoting).
};

// The values one rendering sees. `values` holds what is known at load
// (`source`, `params`); `runtime` names roots only set when it runs.
struct Values {
  std::set<std::string> vars;  // Across vars in scope (text values).
  nlohmann::json values = nlohmann::json::object();
  std::set<std::string> runtime;
  std::string missing_hint;  // Why a root may be missing here.
};

// The line of the expression: a block scalar's text starts below its key.
int ExpressionLine(const Place& place, const std::string& text,
                   const TemplateUse& use) {
  bool block = text.find('\n') != std::string::npos;
  return place.line + use.line_offset + (block ? 1 : 0);
}

std::string Names(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "." : ", .") + n;
  return out.empty() ? "none" : out;
}

// Why `use` names a value that is never set, or "".
std::string MissingValue(const TemplateUse& use, const Values& v) {
  if (use.literal) return "";
  if (use.path.empty()) {
    return use.written + " names no value: write a path such as .name";
  }
  const std::string& root = use.path[0];
  if (v.vars.count(root)) {
    if (use.path.size() == 1) return "";
    return use.written + ": ." + root +
           " is an across value (text), which has no ." + use.path[1];
  }
  if (v.runtime.count(root)) return "";
  if (v.values.contains(root)) {
    const nlohmann::json* node = &v.values;
    std::string walked;
    for (const std::string& name : use.path) {
      walked += "." + name;
      if (!node->is_object() || !node->contains(name)) {
        return use.written + ": " + walked + " is not set" + v.missing_hint;
      }
      node = &(*node)[name];
    }
    return "";
  }
  std::set<std::string> known = v.vars;
  for (const auto& [k, unused] : v.values.items()) known.insert(k);
  known.insert(v.runtime.begin(), v.runtime.end());
  return use.written + ": ." + root +
         " is not set here (known: " + Names(known) + ")" +
         " — to pass '{{' through to the program, write {{ \"{{\" }}";
}

void CheckText(const std::string& text, const Place& place, const Values& v,
               Diagnostics& d) {
  Result<std::vector<TemplateUse>> uses = ScanTemplate(text, place.mixed);
  if (!uses.ok()) {
    if (!place.shell && !place.mixed) return;  // Reported for the type.
    d.Error(place.line, place.what + ": " + uses.status().message());
    return;
  }
  for (const TemplateUse& use : *uses) {
    const int line = ExpressionLine(place, text, use);
    std::string why = place.values ? MissingValue(use, v) : "";
    if (!why.empty()) {
      d.Error(line, place.what + ": " + why);
      continue;
    }
    if (place.shell && !use.literal &&
        (use.pipes.empty() || use.pipes.back() != "shellquote")) {
      d.Error(line, place.what + ": " + use.written +
                        " would put a value into a shell script unquoted, "
                        "where its text runs as code — end it with "
                        "'| shellquote' (e.g. {{ ." +
                        (use.path.empty() ? std::string("name") : use.path[0]) +
                        (use.pipes.empty() ? "" : " | json") +
                        " | shellquote }})");
    }
  }
}

// The scripts a get (check, in) or a put (out) runs, against that step's
// resource and params.
void CheckResourceStep(const Pipeline& p, const Step& s,
                       const std::set<std::string>& vars, Diagnostics& d) {
  const Resource* res = p.FindResource(s.resource);
  const ResourceType* type = res ? p.FindResourceType(res->type) : nullptr;
  if (!type) return;  // Reported by CheckReferences.
  Values v;
  v.vars = vars;
  v.values = {{"source", res->source}, {"params", s.params}};
  v.missing_hint = " (resource '" + res->name + "' and this step's params)";
  const std::string prefix = "resource type '" + type->name + "' ";
  if (s.kind == StepKind::kGet) {
    CheckText(type->check, {prefix + "check", type->check_line}, v, d);
    v.runtime = {"version"};
    CheckText(type->in, {prefix + "in", type->in_line}, v, d);
  } else {
    CheckText(type->out, {prefix + "out", type->out_line}, v, d);
  }
}

void CheckSteps(const Pipeline& p, const std::vector<StepPtr>& steps,
                const std::set<std::string>& vars, Diagnostics& d);

void CheckStep(const Pipeline& p, const Step& s,
               const std::set<std::string>& outer, Diagnostics& d) {
  StepScope scope(d, s.line);
  std::set<std::string> vars = outer;
  for (const AcrossVar& a : s.across) vars.insert(a.var);
  Values v;
  v.vars = vars;
  if (s.kind == StepKind::kTask) {
    CheckText(s.run, {"task '" + s.name + "' run", s.run_line, true, true}, v,
              d);
  } else if (s.kind == StepKind::kAgent) {
    for (const std::string& m : s.messages)
      CheckText(m, {"agent step '" + s.name + "' message", s.line, false, true},
                v, d);
  } else if (s.kind == StepKind::kGet || s.kind == StepKind::kPut) {
    CheckResourceStep(p, s, vars, d);
  } else if (s.kind == StepKind::kGate && s.gate) {
    CheckText(s.gate->message,
              {"gate '" + s.name + "' message", s.line, false, true}, v, d);
  }
  CheckSteps(p, s.steps, vars, d);
  for (HookKind k : kAllHooks) {
    // A hook runs in the scope of its step, but not in its across cells.
    if (const StepPtr& h = s.hooks.Get(k)) CheckStep(p, *h, outer, d);
  }
}

void CheckSteps(const Pipeline& p, const std::vector<StepPtr>& steps,
                const std::set<std::string>& vars, Diagnostics& d) {
  for (const StepPtr& s : steps) {
    if (s) CheckStep(p, *s, vars, d);
  }
}

// Syntax and quoting of every resource type's scripts, used or not; the
// values they name are checked per step (CheckResourceStep).
void CheckResourceTypes(const Pipeline& p, Diagnostics& d) {
  for (const ResourceType& t : p.resource_types) {
    const std::string prefix = "resource type '" + t.name + "' ";
    const Values none;
    CheckText(t.check, {prefix + "check", t.check_line, true, false, false},
              none, d);
    CheckText(t.in, {prefix + "in", t.in_line, true, false, false}, none, d);
    CheckText(t.out, {prefix + "out", t.out_line, true, false, false}, none, d);
  }
}

}  // namespace

void CheckTemplates(const Pipeline& p, Diagnostics& d) {
  CheckResourceTypes(p, d);
  for (const Job& job : p.jobs) {
    CheckSteps(p, job.plan, {}, d);
    for (HookKind k : kAllHooks) {
      if (const StepPtr& h = job.hooks.Get(k)) CheckStep(p, *h, {}, d);
    }
  }
}

}  // namespace steps::pipeline::internal
