// Shared between the loader's files; not part of the pipeline API.
#ifndef STEPS_PIPELINE_LOADER_INTERNAL_H_
#define STEPS_PIPELINE_LOADER_INTERNAL_H_

#include <yaml-cpp/yaml.h>

#include <functional>

#include "pipeline/diagnostics.h"
#include "pipeline/model.h"
#include "pipeline/yaml_reader.h"

namespace steps::pipeline::internal {

struct StepContext {
  Diagnostics& diags;
  bool in_ensure = false;  // Inside an `ensure` hook: retry is refused.
};

// Reads one step mapping; null when it cannot be read at all.
StepPtr ReadStep(const YAML::Node& node, StepContext ctx);
// Reads a list of steps (`plan:`, `do:`, ...).
std::vector<StepPtr> ReadStepList(const YAML::Node& node,
                                  const std::string& key, StepContext ctx);
// Reads the five hook keys from `r` into `hooks`.
void ReadHooks(MapReader& r, Hooks& hooks, StepContext ctx);
std::optional<Budget> ReadBudget(const YAML::Node& n, const std::string& key,
                                 Diagnostics& d);

// Reads a step's `assert:` (assert_loader.cc) into step.check; the step's
// kind must already be set (some checks apply to agent steps only).
void ReadStepAssert(const YAML::Node& n, Step& step, Diagnostics& d);

// Reads `sandbox:` from `r` (sandbox_key.cc): a word (bwrap, none) or
// {kind, network}. Errors name the line and the forms accepted.
void ReadSandbox(MapReader& r, Written<SandboxSpec>& out, Diagnostics& d);
// guard_loader.cc: a source's `rate_limit:` (refused on a CLI source), and
// `retry_budget:` / `circuit:` of an agent entry or defaults (`where` is
// "" or "defaults."). An empty value takes every default.
void ReadRateLimit(MapReader& r, const std::string& key, ModelSource& s,
                   Diagnostics& d);
void ReadRetryBudget(MapReader& r, const std::string& where,
                     Written<RetryBudgetSpec>& out, Diagnostics& d);
void ReadCircuit(MapReader& r, const std::string& where,
                 Written<CircuitSpec>& out, Diagnostics& d);
// The same on a step; refused on blocks (in_parallel, do, try, across).
void ReadStepSandbox(MapReader& r, Step& step, Diagnostics& d);
// `runner:` and `slurm:` (runner_key.cc) of defaults or a job; on a step,
// refused but on task, get and put steps.
void ReadRunner(MapReader& r, Written<RunnerKind>& runner, SlurmSpec& slurm,
                Diagnostics& d);
void ReadStepRunner(MapReader& r, Step& step, Diagnostics& d);
// Calls `visit` on every step of `job`: its plan, the blocks' steps, and
// every hook's (the job's own too), saying whether the step is in a hook.
void ForEachStepOf(const Job& job,
                   const std::function<void(const Step&, bool in_hook)>& visit);
// Refuses an across block whose cells run on Slurm inside a hook of `job`
// (or of one of its steps): a hook runs past the job's deadline, which is
// what bounds a cell's time on a node.
void RefuseRemoteCellsInHooks(const Job& job, Diagnostics& d);
// `env:` as a mapping NAME: value (values may hold `${NAME}` references)
// or a list of names, each passed through as NAME: ${NAME}. Names and
// references are checked; nullopt (after an error) when malformed.
std::optional<std::map<std::string, std::string>> ReadEnv(
    const YAML::Node& n, const std::string& key, Diagnostics& d);
// A source's `env:` (CLI sources only) into `s`.
void ReadSourceEnv(MapReader& r, const std::string& key, ModelSource& s);
// A hosted source's `headers:`: NAME: value, sent with every request;
// `${NAME}` references expanded from the environment when the step runs.
void ReadSourceHeaders(MapReader& r, const std::string& key, ModelSource& s);
// A `headers:` mapping at `where` (e.g. "source.headers"): names are HTTP
// tokens and not among the headers steps sets itself (Content-Type, Host,
// X-Steps-*, ... and `also_owned`, lower case); values hold no line break
// and only well-formed `${NAME}` references. nullopt after an error.
std::optional<std::map<std::string, std::string>> ReadHeaderMap(
    const YAML::Node& n, const std::string& where,
    const std::vector<std::string>& also_owned, Diagnostics& d);
// The model parameter keys (temperature, top_p, seed, max_output_tokens,
// stop, response_format) from `r` into `p`; `where` prefixes keys in
// messages ("source."); `first_line` gets the first key's line if unset.
void ReadModelParameters(MapReader& r, const std::string& where,
                         ModelParameters& p, int& first_line, Diagnostics& d);
// The top-level `secrets:` list of variable names.
void ReadSecrets(const YAML::Node& n, Pipeline& p, Diagnostics& d);

// The top-level `mock:` (mock_key.cc): an inline script or {file: PATH},
// read relative to the pipeline's folder, into p.mock and p.mock_file.
// Errors name the pipeline's line and, for a file, the file's own line.
void ReadMock(const YAML::Node& mock, int key_line, Pipeline& p,
              Diagnostics& d);

// The top-level `tools:` list of command tools (tool_loader.cc).
void ReadToolDefs(const YAML::Node& n, Pipeline& p, Diagnostics& d);
// The top-level `mcp_servers:` list (mcp_loader.cc); after ReadToolDefs.
void ReadMcpServers(const YAML::Node& n, Pipeline& p, Diagnostics& d);

// A top-level list: absent or null is nothing; anything but a list is
// "'KEY' must be WHAT, not TYPE" at its line; each item goes to `fn`.
template <typename Fn>
void ReadList(const YAML::Node& n, const std::string& key,
              const std::string& what, Diagnostics& d, Fn fn) {
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsSequence()) {
    d.Error(LineOf(n),
            "'" + key + "' must be " + what + ", not " + DescribeNodeType(n));
    return;
  }
  for (const YAML::Node& item : n) fn(item);
}

// Cross-reference checks over the whole pipeline (agents, resources, `to:`,
// inputs); run after everything is read.
void CheckReferences(const Pipeline& p, Diagnostics& d);

// Template expressions (template_checks.cc): every value they name exists
// where they are rendered, and whatever a shell runs is shell-quoted.
void CheckTemplates(const Pipeline& p, Diagnostics& d);

}  // namespace steps::pipeline::internal

#endif  // STEPS_PIPELINE_LOADER_INTERNAL_H_
