// What `steps run` and `steps test` share: wiring an executor to this
// machine (processes, signals, agents) and turning outcomes into exit codes.
#ifndef STEPS_CLI_RUN_SUPPORT_H_
#define STEPS_CLI_RUN_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/prices.h"
#include "agent/recording.h"
#include "pipeline/executor.h"
#include "pipeline/resolve.h"
#include "store/resume.h"

namespace steps::cli {

struct RunSetup {
  std::string state_dir = ".steps";
  bool mock = false;  // Serve every agent source from the file's mock: block.
  std::vector<std::string> jobs;
  pipeline::RunObserver* observer = nullptr;
  // Reuse steps from the step cache (`steps run` without --no-cache). Off,
  // succeeded steps are still remembered for later runs.
  bool use_cache = false;
  // The run's id; empty: a new one (pipeline::NewRunId).
  std::string run_id;
  // The channel that started the run ("mcp"), recorded in `Taken by:`.
  std::string via;
  // Record every agent request as a mock script (`steps run --record`):
  // RunOutcome::recording holds it.
  bool record = false;
  // The pipeline file's bytes as loaded, recorded with the run (its SHA-256
  // too) so that `steps resume` can tell whether it changed. Empty for a
  // pipeline read from stdin: such a run cannot be resumed.
  std::string file_text;
  // `steps resume`: the interrupted run to continue under its own id
  // (run_id is ignored). Not owned; null for a new run.
  const store::ResumePoint* resume = nullptr;
  // The run's lock when the caller holds it already (a resume takes it
  // before it reads the run); null: RunPlan takes it.
  std::shared_ptr<store::RunLock> lock;
  // Prices answers that no `price:` and no reported cost price
  // (`--prices FILE`, cli/prices_file.h); null: none.
  std::shared_ptr<const agent::PriceTable> prices;
  // The file `prices` came from, handed to the cells that run on Slurm
  // nodes (`--prices`); empty: none.
  std::string prices_file;
};

struct RunOutcome {
  pipeline::RunRecord record;
  int signal = 0;  // The signal that aborted the run, or 0.
  // Problems the mock provider saw (unmet `expect:`), when serving one.
  std::vector<std::string> mock_problems;
  // The same, each with the step whose request missed (its X-Steps-Step:
  // the step's name, "TASK/fix" for a fixer), in the order requests came.
  struct MockMiss {
    std::string step;
    std::string problem;
  };
  std::vector<MockMiss> mock_misses;
  // With RunSetup::record: every agent request of the run, secrets masked.
  std::shared_ptr<agent::MockRecorder> recording;
};

// Runs the jobs of `plan` with the local process launcher, SIGINT/SIGTERM
// handling and the agent runner the setup asks for. This process becomes a
// child subreaper, so nothing a step starts outlives it (setsid daemons
// included); the run holds STATE_DIR/runs/RUN.lock while it runs and
// records its running process groups in the store. The values of the
// pipeline's secret variables are added to the process-wide redactor and
// masked in every event the observers get, in the store and in the
// returned record; provider key variables are withheld from child
// processes unless an `env:` entry passes them (docs/secrets.md).
RunOutcome RunPlan(const pipeline::ResolvedPlan& plan, const RunSetup& setup);

// `steps run FILE --cell -`: runs one cell of an across block here for the
// run that sent it (cli/slurm_cells.h), writing its events to `out` as JSON
// lines (pipeline/event_stream.h), the cell's end last. Nothing is stored
// (the sending run keeps the records) and no lock is taken; the steps run
// on this machine (whatever their runner), with the setup's agents, the
// pipeline's secrets masked and provider keys withheld from tasks, and end
// on SIGINT/SIGTERM as a run's do. Returns the cell's end, as written.
pipeline::CellEnd RunCellHere(const pipeline::ResolvedPlan& plan,
                              const RunSetup& setup,
                              const pipeline::CellTask& task, std::FILE* out);

// The exit code of `steps run --cell` for a cell that ended so: as a run's
// with one job (0, 1, 2; 130 aborted).
int ExitCodeForCell(const pipeline::CellEnd& end);

// Ends what runs that died left running: for every run in the store under
// `state_dir` that recorded running process groups and whose lock is free,
// kills each group whose leader is still the recorded process (same start
// time), marks the rows `killed` or `gone`, and logs
// `WRN run.orphans_killed run=R groups=N` when it killed any. Never blocks
// on a live run. Only RunPlan calls it (`steps run`, `steps resume`), on
// the store it records the run in, before any step starts: read-only
// commands leave every process alone. `own_run` names the run this
// process holds the lock of (a resume: empty when it could not take it):
// its groups were recorded by an earlier process of it, which died, also
// when its guardian died with it and the lock alone cannot tell.
void EndOrphanedRuns(store::Store& db, const std::string& state_dir,
                     const std::string& own_run);

// 0 all succeeded; 1 a job failed; 2 a job failed because a step errored;
// 129/130/143 aborted by SIGHUP/SIGINT/SIGTERM.
int ExitCodeFor(const RunOutcome& outcome);

}  // namespace steps::cli

#endif  // STEPS_CLI_RUN_SUPPORT_H_
