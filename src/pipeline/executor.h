// Runs jobs of a resolved plan: steps, attempts, timeouts, retry backoff,
// hooks, blocks and fan-outs, with the semantics of spec texts 000 and 002.
// The executor reaches the world only through what it is given: a clock, a
// process launcher, an agent runner and an observer.
#ifndef STEPS_PIPELINE_EXECUTOR_H_
#define STEPS_PIPELINE_EXECUTOR_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "core/cancel.h"
#include "core/clock.h"
#include "core/trace.h"
#include "pipeline/environment.h"
#include "pipeline/gate.h"
#include "pipeline/observer.h"
#include "pipeline/resolve.h"
#include "pipeline/resume_state.h"
#include "pipeline/run_record.h"
#include "pipeline/step_cache.h"
#include "process/process.h"

namespace steps::pipeline {

// One cell of an across block, run by itself for a run elsewhere (`steps
// run --cell`, on a Slurm node): the sending run keeps the records, this
// one only reports them (ExecutorOptions::observer, an EventWriter). Its
// run_id and state_dir are the sending run's, so that its steps work in
// the same job folder (on a filesystem both see).
struct CellTask {
  std::string job;
  // Where the block is: the index of each step on the way down from the
  // job's plan through blocks' steps ({1, 0}: the first step of the
  // job's second step).
  std::vector<size_t> path;
  // The block's id in its job ("3", "2.1#2"): its cells' step ids begin
  // with it.
  std::string block_id;
  size_t cell = 0;  // 0-based, in the block's order.
  // The cells around the block (an across inside another): their values
  // ("os=linux") and variables; empty otherwise.
  std::string outer_cell;
  nlohmann::json outer_vars = nlohmann::json::object();
  // The job's deadline, on the wall clock (the machines' steady clocks
  // share no origin; a cluster's wall clocks agree, as Slurm needs them
  // to); nullopt: the job has none.
  std::optional<WallTime> job_deadline;
  // Spent under the job's budget when the cell was sent: the cell's agent
  // steps stop where the job's budget would stop them.
  int64_t job_tokens_spent = 0;
  double job_usd_spent = 0;
  // When it was handed to the scheduler, on the wall clock: the cell's
  // time in the queue is from here to its start. nullopt: not known.
  std::optional<WallTime> sent;
  // A resumed run (`steps resume`): the cell's steps that ended before the
  // interruption. They are replayed, not run again; a step that was in
  // flight starts again.
  std::vector<StepRecord> finished;
};

// An across cell sent to run elsewhere (an across block with `runner:
// slurm`): what to run, where, and what stops it.
struct RemoteCell {
  CellTask task;
  ClusterPlacement placement;  // The block's `slurm:` keys, resolved.
  std::string label;           // "cell os=linux arch=arm", for messages.
  CancelToken cancel;          // An abort, or a sibling's fail_fast.
  Millis kill_grace{2000};
};

// Runs remote cells (cli: `steps run --cell` as a Slurm job). Thread-safe:
// a fan-out runs several at once.
class CellLauncher {
 public:
  virtual ~CellLauncher() = default;
  // Runs `cell`, reporting its events to `events` as they come (from the
  // caller's thread or the launcher's, one at a time), and returns how it
  // ended; a cell that ended without saying so is errored, saying why.
  virtual CellEnd Run(const RemoteCell& cell, RunObserver& events) = 0;
  // The budget of `job` is spent (`why`: "token budget of 200 spent (230
  // used)"), counting what its cells spent so far: cells still running
  // should send no further request (ExecutorOptions::job_budget_elsewhere
  // on their side). Called once per job, from any thread.
  virtual void JobBudgetSpent(const std::string& job, const std::string& why) {
    (void)job;
    (void)why;
  }
};

struct ExecutorOptions {
  // All time reads and waits (backoff, deadlines). Not owned.
  // Default: RealClock().
  Clock* clock = &RealClock();
  // Runs task, get and put scripts. Not owned; required.
  ProcessLauncher* launcher = nullptr;
  // Runs the scripts of steps whose runner is slurm (process/
  // slurm_launcher.h). Not owned. Null: such a step ends errored, saying
  // this run has no Slurm runner.
  ProcessLauncher* slurm = nullptr;
  // Runs the cells of across blocks whose runner is slurm. Not owned.
  // Null: such a cell ends errored, saying this run has no Slurm runner.
  CellLauncher* cells = nullptr;
  // In a cell run by itself (RunCell, on a node): why the run that sent it
  // found `job`'s budget spent (CellLauncher::JobBudgetSpent), or nullopt.
  // Asked before each model request while the cell's own view of the job's
  // spending is under the budget. Null: the cell sees only what the job had
  // spent when it was sent, and its own spending.
  std::function<std::optional<std::string>(const std::string& job)>
      job_budget_elsewhere;
  // Runs agent steps and fixers. Not owned. Null: agent steps end errored
  // with a message saying no agent runner is available.
  agent::AgentRunner* agents = nullptr;
  // Where gate steps are put up for a decision and looked at (gate.h). Not
  // owned. Null: a gate ends errored, saying nothing here can decide it.
  GateDesk* gates = nullptr;
  // Receives every event. Not owned; may be null.
  RunObserver* observer = nullptr;
  // Task and agent steps found here are not run again (step_cache.h). Not
  // owned. Default: null, no cache.
  StepCache* cache = nullptr;
  // Where runs keep their working directories and artifacts:
  // STATE_DIR/runs/RUN_ID/JOB/... Default: ".steps".
  std::string state_dir = ".steps";
  // Identifies the run; generated (time + random) when empty.
  std::string run_id;
  // The pipeline file, for the record.
  std::string file;
  // The channel the run was started through ("mcp" for `steps mcp`),
  // recorded after user@host as "(via CHANNEL)". Default: empty, none.
  std::string via;
  // Cancelled on SIGINT/SIGTERM: stops everything at once.
  CancelToken abort;
  // Cancelled on a second signal: cuts on_abort and ensure hooks, which run
  // after an abort under this token rather than the cancelled one.
  CancelToken cleanup_abort;
  // Between SIGTERM and SIGKILL for a task's process group.
  Millis kill_grace{2000};
  // Extra environment for every task (over the pipeline's defaults.env).
  std::map<std::string, std::string> env;
  // Where `${NAME}` in `env:` values (steps, defaults, CLI sources) is
  // looked up: the environment steps runs in, which the launcher's base
  // environment may withhold variables of (environment.h).
  // Default: ProcessEnvLookup().
  EnvLookup lookup_env = ProcessEnvLookup();
  // Set when this run continues an interrupted one (`steps resume`, with
  // run_id the same id): its finished steps are not run again, and time
  // already spent counts against deadlines (resume_state.h). Not owned.
  // Default: null, a fresh run.
  const ResumeState* resume = nullptr;
  // The run's span when its trace is exported (docs/observability.md):
  // each task attempt then gets TRACEPARENT naming its attempt's span
  // (spans.h), and each agent conversation is a child of it. Invalid
  // (the default): none is given.
  trace::SpanContext trace;
};

class Executor {
 public:
  // `plan` must outlive the executor.
  Executor(const ResolvedPlan& plan, ExecutorOptions options);
  ~Executor();

  // Runs the named jobs (all when empty), in file order, one after another.
  // REQUIRES: every name is a job of the plan.
  RunRecord Run(const std::vector<std::string>& jobs);

  // Runs one cell of an across block (see CellTask); errored, saying why,
  // when the task does not name one.
  CellEnd RunCell(const CellTask& task);

  const std::string& run_id() const;
  // The folder of this run: STATE_DIR/runs/RUN_ID.
  std::string run_dir() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A new run id: "20261130-063000-3f2a" (UTC time and 16 random bits).
std::string NewRunId(const Clock& clock);

// Whether `text` has the shape of a run id NewRunId makes.
bool IsRunId(const std::string& text);

// "user@host" of this process, for records; with a channel,
// "user@host (via CHANNEL)" (DESIGN.md, the `Taken by:` grammar). The user
// is the user database's name for the effective uid, or "uid#N" when it
// has none ($USER is never read).
std::string TakenBy(const std::string& via = "");

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_EXECUTOR_H_
