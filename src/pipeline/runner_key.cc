// Reading `runner:` and `slurm:` (defaults, jobs, task/get/put steps):
//   runner: local | slurm
//   slurm: { partition, account, qos, cpus, mem, gres, extra: [...],
//            timeout_includes_queue: bool, retry_lost: bool }
#include <algorithm>
#include <array>
#include <string_view>

#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {
namespace {

constexpr const char* kSlurmKeys =
    "partition, account, qos, cpus, mem, gres, extra, "
    "timeout_includes_queue, retry_lost";

// sbatch options steps sets itself (short forms are refused as such).
struct OwnedOption {
  std::string_view long_form;
  std::string_view why;
};
constexpr std::array<OwnedOption, 14> kOwnedOptions = {{
    {"--time", "steps sets it from the step's timeout"},
    {"--output", "steps reads the job's output itself"},
    {"--error", "steps reads the job's output itself"},
    {"--input", "steps gives the job its stdin"},
    {"--chdir", "the job runs in the step's working directory"},
    {"--job-name", "steps names the job"},
    {"--parsable", "steps reads the job id itself"},
    {"--wrap", "the step's script is the job"},
    {"--array", "one step is one job; use across for many"},
    {"--requeue", "use 'retry_lost: true'"},
    {"--no-requeue", "a lost job is never requeued by Slurm"},
    {"--wait", "steps waits for the job itself"},
    {"--export", "the job gets the step's environment"},
    {"--comment", "steps tags the job with its run"},
}};

// The long option `arg` sets ("--time" of "--time=5"), or "" when it is
// no long option.
std::string_view OptionName(std::string_view arg) {
  if (arg.size() < 3 || arg.substr(0, 2) != "--") return "";
  return arg.substr(0, arg.find('='));
}

// Whether sbatch would read `name` as `option`: the whole name, or (as
// getopt_long takes any unambiguous start of a long option) a start of it.
bool Names(std::string_view name, std::string_view option) {
  return option.substr(0, name.size()) == name;
}

bool HasBlank(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](unsigned char c) { return c <= ' ' || c == 0x7f; });
}

void ReadPlacementName(MapReader& r, const char* key, Written<std::string>& out,
                       Diagnostics& d) {
  YAML::Node n = r.Take(key);
  if (!n.IsDefined()) return;
  const std::string name = std::string("slurm.") + key;
  std::optional<std::string> v = ReadString(n, name, d);
  if (!v) return;
  if (v->empty() || HasBlank(*v)) {
    d.Error(LineOf(n), "'" + name + "' must be a " + key +
                           " name without spaces, not " + ShownEscaped(*v));
    return;
  }
  out.value = *v;
  out.line = LineOf(n);
}

void ReadMem(MapReader& r, Written<std::string>& out, Diagnostics& d) {
  YAML::Node n = r.Take("mem");
  if (!n.IsDefined()) return;
  std::optional<std::string> v = ReadString(n, "slurm.mem", d);
  if (!v) return;
  size_t digits = 0;
  while (digits < v->size() &&
         isdigit(static_cast<unsigned char>((*v)[digits])))
    ++digits;
  const std::string unit = v->substr(digits);
  if (digits == 0 || digits > 12 ||
      !(unit.empty() || unit == "K" || unit == "M" || unit == "G" ||
        unit == "T")) {
    d.Error(LineOf(n),
            "'slurm.mem' must be a size as Slurm writes it (4096, "
            "500M, 16G), not '" +
                *v + "'");
    return;
  }
  out.value = *v;
  out.line = LineOf(n);
}

void ReadExtra(MapReader& r, Written<std::vector<std::string>>& out,
               Diagnostics& d) {
  YAML::Node n = r.Take("extra");
  if (!n.IsDefined()) return;
  std::optional<std::vector<std::string>> v =
      ReadStringList(n, "slurm.extra", d);
  if (!v) return;
  for (const std::string& arg : *v) {
    if (HasControlCharacter(arg)) {
      d.Error(LineOf(n), "'slurm.extra' holds an option with a control byte (" +
                             ShownEscaped(arg) +
                             "): sbatch's options are text");
      return;
    }
    std::string_view name = OptionName(arg);
    if (name.empty()) {
      d.Error(LineOf(n),
              "'slurm.extra' holds sbatch's long options, each with its "
              "value after '=' ('--constraint=avx2'); '" +
                  arg + "' is not one");
      return;
    }
    for (const OwnedOption& o : kOwnedOptions) {
      if (Names(name, o.long_form)) {
        d.Error(LineOf(n), "'slurm.extra' may not set " +
                               std::string(o.long_form) + ": " +
                               std::string(o.why) + " (docs/slurm.md)");
        return;
      }
    }
  }
  out.value = *v;
  out.line = LineOf(n);
}

void ReadFlag(MapReader& r, const char* key, Written<bool>& out,
              Diagnostics& d) {
  YAML::Node n = r.Take(key);
  if (!n.IsDefined()) return;
  if (std::optional<bool> v = ReadBool(n, std::string("slurm.") + key, d)) {
    out.value = *v;
    out.line = LineOf(n);
  }
}

void ReadSlurmMap(const YAML::Node& n, SlurmSpec& out, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(out.line, "'slurm' must be a mapping of " +
                          std::string(kSlurmKeys) + ", not " +
                          DescribeNodeType(n));
    return;
  }
  MapReader r(n, "'slurm'", d);
  ReadPlacementName(r, "partition", out.partition, d);
  ReadPlacementName(r, "account", out.account, d);
  ReadPlacementName(r, "qos", out.qos, d);
  ReadPlacementName(r, "gres", out.gres, d);
  if (YAML::Node c = r.Take("cpus"); c.IsDefined()) {
    if (std::optional<int64_t> v = ReadInt(
            c, "slurm.cpus", 1, 100000, "a whole number from 1 to 100000", d)) {
      out.cpus.value = static_cast<int>(*v);
      out.cpus.line = LineOf(c);
    }
  }
  ReadMem(r, out.mem, d);
  ReadExtra(r, out.extra, d);
  ReadFlag(r, "timeout_includes_queue", out.timeout_includes_queue, d);
  ReadFlag(r, "retry_lost", out.retry_lost, d);
  r.Finish();
}

// The first gate in `steps` or their hooks, at any depth; null if none.
const Step* FindGate(const std::vector<StepPtr>& steps) {
  for (const StepPtr& s : steps) {
    if (!s) continue;
    if (s->kind == StepKind::kGate) return s.get();
    if (const Step* g = FindGate(s->steps)) return g;
    for (HookKind k : kAllHooks) {
      if (const StepPtr& h = s->hooks.Get(k)) {
        if (const Step* g = FindGate({h})) return g;
      }
    }
  }
  return nullptr;
}

// An across block whose cells run on Slurm (`runner: slurm` on the block):
// each cell is one job running steps on a node, so what only a step's own
// Slurm job means, and what only this machine can do, is refused.
void CheckRemoteCells(const Step& step, Diagnostics& d) {
  if (step.runner.value != RunnerKind::kSlurm) return;
  for (const auto& [written, key] :
       {std::pair{step.slurm.timeout_includes_queue.has_value()
                      ? step.slurm.timeout_includes_queue.line
                      : 0,
                  "timeout_includes_queue"},
        std::pair{
            step.slurm.retry_lost.has_value() ? step.slurm.retry_lost.line : 0,
            "retry_lost"}}) {
    if (written > 0) {
      d.Error(written,
              "'slurm." + std::string(key) +
                  "' applies to a task, get or put step's own Slurm job, not "
                  "to an across block's cells (a cell's time is the job's "
                  "deadline, queue included; a lost cell is errored)");
    }
  }
  if (const Step* gate = FindGate(step.steps)) {
    d.Error(gate->line,
            "gate '" + gate->name +
                "' is in an across block whose cells run on Slurm (runner: "
                "slurm, line " +
                std::to_string(step.runner.line) +
                "): nobody can decide a gate on a node; move it out of the "
                "block");
  }
}

}  // namespace

void ForEachStepOf(
    const Job& job,
    const std::function<void(const Step&, bool in_hook)>& visit) {
  std::function<void(const std::vector<StepPtr>&, bool)> walk =
      [&](const std::vector<StepPtr>& steps, bool in_hook) {
        for (const StepPtr& s : steps) {
          if (!s) continue;
          visit(*s, in_hook);
          walk(s->steps, in_hook);
          for (HookKind k : kAllHooks)
            if (const StepPtr& h = s->hooks.Get(k)) walk({h}, true);
        }
      };
  walk(job.plan, false);
  for (HookKind k : kAllHooks)
    if (const StepPtr& h = job.hooks.Get(k)) walk({h}, true);
}

void RefuseRemoteCellsInHooks(const Job& job, Diagnostics& d) {
  ForEachStepOf(job, [&](const Step& s, bool in_hook) {
    if (!in_hook || s.kind != StepKind::kAcross ||
        s.runner.value != RunnerKind::kSlurm)
      return;
    d.Error(s.runner.line,
            "across block '" + s.name +
                "' sends its cells to Slurm (runner: slurm) from inside a "
                "hook: a cell's time on a node is its job's deadline, "
                "which a hook runs past; run the cells here (drop 'runner: "
                "slurm') or move the block out of the hook");
  });
}

void ReadRunner(MapReader& r, Written<RunnerKind>& runner, SlurmSpec& slurm,
                Diagnostics& d) {
  if (YAML::Node n = r.Take("runner"); n.IsDefined()) {
    if (std::optional<std::string> v = ReadString(n, "runner", d)) {
      if (*v == "local") {
        runner.value = RunnerKind::kLocal;
      } else if (*v == "slurm") {
        runner.value = RunnerKind::kSlurm;
      } else {
        d.Error(LineOf(n), "'runner' must be local or slurm, not '" + *v + "'");
      }
      runner.line = r.KeyLine("runner");
    }
  }
  if (YAML::Node n = r.Take("slurm"); n.IsDefined()) {
    slurm.line = r.KeyLine("slurm");
    ReadSlurmMap(n, slurm, d);
  }
}

void ReadStepRunner(MapReader& r, Step& step, Diagnostics& d) {
  if (!r.Has("runner") && !r.Has("slurm")) return;
  const char* key = r.Has("runner") ? "runner" : "slurm";
  std::string refusal;
  if (step.is_container() && step.kind != StepKind::kAcross) {
    refusal =
        "applies to task, get and put steps and to across blocks, not to "
        "this block: set it on the steps inside, on the job, or under "
        "'defaults:'";
  } else if (step.kind == StepKind::kAgent) {
    refusal =
        "applies to task, get and put steps: an agent step runs "
        "where steps runs";
  } else if (step.kind == StepKind::kGate) {
    refusal = "applies to task, get and put steps; a gate runs nothing";
  }
  if (!refusal.empty()) {
    const int line = r.KeyLine(key);
    r.Take("runner");
    r.Take("slurm");
    d.Error(line, "'" + std::string(key) + "' " + refusal);
    return;
  }
  ReadRunner(r, step.runner, step.slurm, d);
  if (step.kind == StepKind::kAcross) CheckRemoteCells(step, d);
}

}  // namespace steps::pipeline::internal
