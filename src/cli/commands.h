// The `steps` subcommands, in one table so help and dispatch cannot drift.
#ifndef STEPS_CLI_COMMANDS_H_
#define STEPS_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/prices.h"
#include "cli/exit_codes.h"
#include "core/status.h"
#include "pipeline/resolve.h"

namespace steps::store {
struct ResumePoint;
struct GateRow;
}  // namespace steps::store
namespace steps::pipeline {
enum class GateDecision;
}  // namespace steps::pipeline

namespace steps::cli {

// One subcommand: Setup declares its options on `app` and returns the
// function that runs it once the command line is parsed.
struct Command {
  const char* name;
  const char* description;
  std::function<std::function<int()>(CLI::App& app)> setup;
};

Command ValidateCommand();
Command ExplainCommand();
Command RunCommand();
Command TestCommand();
Command ShowCommand();
Command RunsCommand();
Command CostCommand();
Command CacheCommand();
Command UiCommand();
Command InitCommand();
Command CompletionCommand();
Command ProvidersCommand();
Command McpCommand();
Command ResumeCommand();
Command ApproveCommand();
Command RejectCommand();

// `steps __guard STATE_DIR RUN_ID PID locked|unlocked`: the run guardian's side
// (process/guardian.h), started by `steps run` and `steps test`, never by a
// user. Not in the command table, so neither help nor completion lists it.
int RunGuardianCommand(int argc, char** argv);

// What `steps approve` / `steps reject` and the MCP server's tools of the
// same names share: records `decision` on gate `step` (a step id, or a name
// one gate has) of run `run` (an id, a unique prefix, or "" for the newest)
// in the store under `state_dir`, taken by the OS user running this
// process (user@host; the gate's approvers must name that user) via `via`.
// The gate as decided, or why not (store/gates.h DecideGate).
Result<store::GateRow> DecideAsThisUser(const std::string& state_dir,
                                        const std::string& run,
                                        const std::string& step,
                                        pipeline::GateDecision decision,
                                        const std::string& reason,
                                        const std::string& via);
// "Approved gate 'deploy' (j:1) of run RUN\n  Taken by: USER@HOST (via
// cli)\n": what a recorded decision reports.
std::string DecisionReport(const store::GateRow& gate);

// The line `steps validate` prints for a file that loads, e.g.
// "Valid: w (1 step) — 1 warning; failing due to --strict" (spec text 000).
std::string ValidSummary(const std::string& name, int steps, int warnings,
                         bool strict);

// What `steps validate [--strict] FILE` prints for one file: its
// diagnostics ("FILE:LINE: error: ...", one a line; standard error) and
// the summary line without its newline (standard output).
struct ValidateReport {
  std::string diagnostics;
  std::string summary;
  bool refused = false;  // Errors, or warnings under `strict`: exit 65.
};
ValidateReport ValidateFile(const std::string& file, bool strict);

// What `steps explain FILE [--job NAME]...` prints: the load's diagnostics
// (standard error), why it stopped short if it did ("no job named ...",
// without the command's prefix), the explanation (standard output) and the
// exit code.
struct ExplainReport {
  std::string diagnostics;
  std::string error;
  std::string text;
  int exit_code = kExitOk;
};
ExplainReport ExplainFile(const std::string& file,
                          const std::vector<std::string>& jobs,
                          const pipeline::PlanOptions& plan_options = {});

// What `steps resume` and `steps run --resume-if-interrupted` share.
struct ResumeOptions {
  std::string state_dir = ".steps";
  bool fresh_deadlines = false;  // Deadlines not carried over.
  bool mock = false;             // Agents served from the mock: block.
  bool plain = false;
  std::string prices;  // --prices FILE (STEPS_PRICES); empty: none.
  // Read from it before the run is looked for (LoadPrices); null: none.
  std::shared_ptr<const agent::PriceTable> price_table;
  std::string runner;  // --runner (STEPS_RUNNER); empty: as the file says.
};

// The run `run` of the store under `state_dir` (empty: the newest
// interrupted or aborted one, of pipeline `file` when set), ready to
// resume; NotFound when there is none.
Result<store::ResumePoint> FindResumePoint(const std::string& state_dir,
                                           const std::string& run,
                                           const std::string& file,
                                           bool fresh_deadlines);

// The bytes of a pipeline file; NotFound when it cannot be read.
Result<std::string> ReadPipelineBytes(const std::string& file);

// Continues `point` under its own id after checking that its pipeline file
// is unchanged (65 and what changed when it is not); the exit code as
// `steps run` gives it.
int ResumeRun(const ResumeOptions& opts, const store::ResumePoint& point);

}  // namespace steps::cli

#endif  // STEPS_CLI_COMMANDS_H_
