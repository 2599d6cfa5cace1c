// The executor's inside: one JobRunner per job. Not part of the API.
#ifndef STEPS_PIPELINE_EXECUTOR_INTERNAL_H_
#define STEPS_PIPELINE_EXECUTOR_INTERNAL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "pipeline/executor.h"
#include "pipeline/folder_maker.h"
#include "pipeline/step_assert.h"
#include "pipeline/workspace.h"
#include "process/sandbox_bwrap.h"

namespace steps::pipeline {

class Executor::Impl {
 public:
  Impl(const ResolvedPlan& plan, ExecutorOptions options);
  RunRecord Run(const std::vector<std::string>& jobs);

  const ResolvedPlan& plan;
  ExecutorOptions opts;
  RunObserver null_observer;
  RunObserver& observer() {
    return opts.observer ? *opts.observer : null_observer;
  }
  std::string run_dir;

  // Whether bwrap works here, checked once per run on the first step that
  // asks for `sandbox: bwrap` (CheckBwrap); a refusal names the fix.
  Status SandboxReady();

 private:
  std::once_flag sandbox_once_;
  Status sandbox_status_;
};

namespace internal {

// How a step (or a sequence of steps) ended.
struct StepResult {
  StepResult() = default;
  StepResult(Outcome o, std::string e, std::string out = "")
      : outcome(o), error(std::move(e)), output(std::move(out)) {}

  Outcome outcome = Outcome::kSucceeded;
  std::string error;
  std::string output;
  // A job-level failure that ends the job, not this step: the job's own
  // deadline passed before a step could start, or `to:` routing ran out of
  // max_visits. No step hook fires for it; the job's hooks do.
  bool job_level = false;
  // Failed because a step errored (for exit code 2).
  bool caused_by_error = false;

  bool ok() const { return outcome == Outcome::kSucceeded; }
};

// Why a block's units were cancelled when no abort did it: set once, by the
// fan-out whose fail_fast cancelled them, before it cancels; read for the
// records of the steps that then never started. Chained to the enclosing
// block's note, since cancelling a block cancels the blocks inside it.
class StopNote {
 public:
  explicit StopNote(std::shared_ptr<const StopNote> outer)
      : outer_(std::move(outer)) {}
  // The first reason wins.
  void Set(const std::string& why) const;
  // This block's reason, else the enclosing block's, else "".
  std::string Why() const;

 private:
  std::shared_ptr<const StopNote> outer_;
  mutable std::mutex mu_;
  mutable std::string why_;
};

// What surrounds a step: cancellation, across variables, shared budgets.
struct Scope {
  CancelToken token;
  nlohmann::json vars = nlohmann::json::object();  // across: var -> value
  std::set<std::string> var_names;
  std::vector<std::shared_ptr<agent::BudgetMeter>> budgets;
  // Charged with what agent steps spent, but never stop one: an across
  // block's budget only decides whether more cells are admitted.
  std::vector<std::shared_ptr<agent::BudgetMeter>> charge_only;
  // Inside a hook: the job's deadline is not checked (hooks run to the end
  // after it passed, each step bounded by its own timeout), and a sibling's
  // fail_fast does not cut it.
  bool in_hook = false;
  // Why `token` was cancelled if no abort did it (fail_fast); may be null.
  std::shared_ptr<const StopNote> stop_note;
  // `to:` routing: the output of the step that routed here, handed to the
  // agent steps of the target as critique in a fresh conversation.
  std::optional<std::string> critique;
  // Inside an across cell: its values, "os=linux arch=arm" (nested cells
  // joined by spaces); empty elsewhere. Carried into every StepRef.
  std::string cell;
};

// The cells of an across block: for each, the index of its value of each
// variable (the cartesian product, first variable slowest).
struct AcrossCells {
  std::vector<std::vector<size_t>> picks;
  size_t in_flight = 1;  // The product of the variables' max_in_flight.

  // "os=linux arch=arm": cell i by its values, after `outer`'s (the cells
  // around the block).
  std::string Values(const Step& step, size_t i,
                     const std::string& outer) const;
  // `outer` with cell i's variables set and its values as `cell`.
  Scope ScopeOf(const Step& step, size_t i, const Scope& outer) const;
  // Where the ids of cell i's steps start: "3.c2.".
  static std::string Prefix(const std::string& block_id, size_t i);
};
AcrossCells AcrossCellsOf(const Step& step);

// What the step cache knows of the workspace before a step runs.
struct WorkspaceBefore {
  std::string snapshot;  // SnapshotDigest: to tell whether the step kept it.
  std::string contents;  // TreeDigest: part of the cache key.
};

class JobRunner {
 public:
  JobRunner(Executor::Impl& ex, const Job& job);
  JobRecord Run();
  // Runs one cell of an across block of this job by itself (CellTask).
  // Its events go to the executor's observer; the caller records nothing.
  CellEnd RunCell(const CellTask& task);

 private:
  StepResult RunSequence(const std::vector<StepPtr>& steps, const Scope& scope,
                         const std::string& id_prefix);
  // A step with its hooks.
  StepResult RunStep(const Step& step, const Scope& scope,
                     const std::string& id, std::optional<HookKind> hook);
  StepResult RunHooks(const Hooks& hooks, StepResult body, const Scope& scope,
                      const std::string& id);
  StepResult RunParallel(const Step& step, const Scope& scope,
                         const std::string& id);
  StepResult RunAcross(const Step& step, const Scope& scope,
                       const std::string& id);
  // The units of a fan-out (in_parallel branches, across cells).
  struct FanOutUnits {
    size_t count = 0;
    size_t limit = 1;
    bool fail_fast = false;
    // Names unit i in its siblings' records: "'lint'", "cell os=linux".
    std::function<std::string(size_t)> label;
    // Why no further unit is admitted (a spent budget); nullopt admits.
    std::function<std::optional<std::string>()> refuse;
    std::function<StepResult(size_t, const Scope&)> run;
    // Records unit i as never started, and why.
    std::function<void(size_t, const std::string&)> not_started;
  };
  // Runs the units with at most `limit` at a time, admitting each only
  // while the job deadline has not passed and nothing cancelled the block;
  // every unit not admitted gets a record that says why.
  StepResult FanOut(const FanOutUnits& units, const Scope& scope);

  // A step that ended before the run was interrupted (ExecutorOptions::
  // resume): its stored record handed to the observers as finished, and its
  // result; nullopt when the step is to run.
  // What an agent step spent is charged to `scope`'s budgets.
  // A task's fix agents that had ended are replayed first, in order, so
  // the job's execution lists them as before.
  std::optional<StepResult> ReplayFinished(const Step& step,
                                           const StepRef& ref,
                                           const Scope& scope);
  // When a step's time counts from: now, or for a resumed step in flight
  // as far back as the time it already spent (its deadline is the timeout
  // minus that); sets rec.started to its first start.
  SteadyTime ResumedStart(const StepRef& ref, StepRecord& rec) const;
  // A resumed step in flight: the attempts that ended before the
  // interruption, put into `rec`; their count (0 for any other step).
  int ResumedAttempts(const StepRef& ref, StepRecord& rec) const;
  // Leaf steps (work_step.cc, agent_step.cc).
  StepResult RunWork(const Step& step, const Scope& scope, const StepRef& ref);
  // How long a step's workspace work (hashing, preparing) may take.
  struct PrepWork {
    WorkLimit limit;
    Millis time{0};  // The limit's length, for messages.
  };
  // A task or agent step's cache lookup: reads the job's workspace (the
  // folder `workspace`) before it (`before`), sets rec.identity to the
  // cache key, and restores a hit.
  // The step's result when it is done (a hit, or a read cut short); nullopt
  // when it is to run (also for steps the cache does not hold).
  std::optional<StepResult> LookUpCache(const Step& step, const Scope& scope,
                                        const StepRef& ref, StepRecord& rec,
                                        SteadyTime start, const PrepWork& prep,
                                        const std::string& workspace,
                                        std::optional<WorkspaceBefore>& before);
  // Ends a task, get or put with `r`: its record finished (from `rec`,
  // moved from) and handed to the observers.
  StepResult FinishWork(StepRecord& rec, SteadyTime start, StepResult r);
  // Remembers a succeeded step in the cache (not one that needed a fix).
  // REQUIRES: the workspace was kept.
  void Remember(const Step& step, const StepRef& ref, StepRecord& rec,
                const StepResult& r);
  // Copies a succeeded step's outputs into the job's workspace, within the
  // last attempt's deadline; `r` becomes the failure when that fails.
  void PublishOutputs(const Step& step, const Scope& scope,
                      const std::string& workdir, SteadyTime start,
                      const Deadline& last_deadline, StepResult& r);
  // Runs a gate step (gate_step.cc): puts it up on the executor's GateDesk
  // and waits for a decision, its timeout, the job's deadline or an abort.
  StepResult RunGate(const Step& step, const Scope& scope, const StepRef& ref);
  // Looks at the open gate `ref` until it is decided or ends: at `until`
  // (the earlier of its own deadline `own` and the job's) or an abort.
  GateVerdict WaitForGate(const Step& step, const Scope& scope,
                          const StepRef& ref, GateDesk& desk,
                          const Deadline& own, const Deadline& until);
  // Runs an agent step that began at `step_start` (steady; moved back by
  // a resumed step's time spent), from which its timeout runs.
  StepResult RunAgent(const Step& step, const Scope& scope, const StepRef& ref,
                      StepRecord& record, SteadyTime step_start);
  // Judges a conversation that succeeded by the step's `assert:`: a miss
  // fails `r`, and the attempt keeps the assertions' results.
  void JudgeAnswer(const Step& step, const Scope& scope, const StepRef& ref,
                   const agent::AgentResult& ar, SteadyTime start,
                   AttemptRecord& attempt, StepResult& r);
  // What a task or resource script gets from the pipeline's `env:` keys
  // (defaults, the executor's extras, the step), references expanded; an
  // unset reference is logged (WRN env.unset) and gives "".
  std::map<std::string, std::string> PipelineEnv(const Step& step,
                                                 const StepRef& ref);
  // A cache hit restored (outputs copied back, the step finished), or
  // nullopt on a miss.
  std::optional<StepResult> RestoreCached(const Step& step, const StepRef& ref,
                                          StepRecord& rec, SteadyTime start,
                                          const WorkLimit& limit);
  Status PrepareWorkDir(const Step& step, const std::string& workdir,
                        const WorkLimit& limit);
  // The attempt loop of a task, get or put (waits, per-attempt deadline,
  // fix); `last_deadline` is set to the last attempt's. The first attempt's
  // time counts from `start`, the step's.
  StepResult RunAttempts(const Step& step, const Scope& scope,
                         const StepRef& ref, const std::string& workdir,
                         SteadyTime start, StepRecord& rec,
                         Deadline& last_deadline);
  // A resumed step with attempts stored: replays the fixers that ended, and
  // says whether its attempts had ended it (a success, or a timeout that is
  // not retried: then `stopped_by_timeout`).
  bool ResumedStepEnded(const Step& step, const Scope& scope,
                        const StepRef& ref, StepRecord& rec,
                        bool& stopped_by_timeout);
  // Attempt `k` of `attempts`, aborted during the wait before it.
  static AttemptRecord AbortedWaitingToRetry(int k, int attempts);
  // The wait before attempt `k` (k > 1), unless it would reach the step's
  // total_timeout (`total`): then no further attempt could start.
  // kPastJobDeadline: a step on Slurm whose next attempt could only start
  // after the job's deadline (its job would never leave the queue).
  enum class RetryWait { kWaited, kPastTotal, kPastJobDeadline, kAborted };
  RetryWait WaitToRetry(const ResolvedStep& rs, int k, const Deadline& total,
                        const Scope& scope);
  // Why attempt `k` of `attempts` of a Slurm step was not started: its
  // retry wait would end past the job's deadline.
  std::string PastJobDeadline(const ResolvedStep& rs, int k,
                              int attempts) const;
  // An attempt's deadline: `timeout` from `from`, or `total` when that comes
  // first (then `clipped` is the time left to it).
  static Deadline AttemptDeadline(SteadyTime from,
                                  std::optional<Millis> timeout,
                                  const Deadline& total,
                                  std::optional<Millis>& clipped);
  // One attempt of a task, get or put: its process(es) and the assert.
  AttemptRecord RunAttempt(const Step& step, const Scope& scope,
                           const StepRef& ref, const std::string& workdir,
                           const Deadline& deadline, int attempt);
  class AttemptScripts;
  // The environment of an attempt's scripts: PipelineEnv, the STEPS_*
  // variables, and the scope's string values.
  std::map<std::string, std::string> AttemptEnv(const Step& step,
                                                const Scope& scope,
                                                const StepRef& ref,
                                                int attempt);
  // The scripts of a task, a put, a get (its check, then its in). Each
  // returns true when the attempt goes on to the assert, false when it
  // ended (`a`'s outcome and error say how); `a.output` is what it gave.
  bool RunTaskScript(const Step& step, const Scope& scope,
                     const std::string& workdir, AttemptScripts& scripts,
                     AttemptRecord& a);
  bool RunResourceScripts(const Step& step, const Scope& scope,
                          const std::string& workdir, AttemptScripts& scripts,
                          AttemptRecord& a);
  bool RunGetScripts(const Step& step, const ResourceType& type,
                     const std::string& workdir, nlohmann::json& ctx,
                     AttemptScripts& scripts, AttemptRecord& a);
  // Runs the fixer of a failed task attempt in its working directory.
  // Runs one conversation (an agent step's or a fixer's) under `scope`,
  // reporting its turns and log lines as `ref`'s.
  agent::AgentResult Converse(const agent::AgentInvocation& inv,
                              const Scope& scope, const StepRef& ref);
  // Judges one result by `step`'s assert: every check, then its `judge:`
  // (RunJudge). Empty when the step has no assert.
  std::vector<AssertionResult> JudgeAssert(const Step& step,
                                           const Scope& scope,
                                           const StepRef& ref,
                                           const AssertSubject& subject);
  // Asks the judge agent of `step`'s assert about `output`: a conversation
  // recorded as a step of its own ("STEP/judge", not in `execution`), whose
  // spending counts toward the job's budget and the run's. A judge that
  // errors or answers no verdict fails the check, saying why.
  AssertionResult RunJudge(const Step& step, const Scope& scope,
                           const StepRef& ref, const std::string& output);

  // Converse for an agent that grants MCP tools: its servers started
  // first (pipeline/mcp_step.h) and stopped once the conversation is over.
  agent::AgentResult ConverseWithMcp(const agent::AgentInvocation& inv,
                                     const agent::AgentContext& ctx);
  // The fix agent of `task` after the attempt `failed`; `resumed` (not
  // owned, may be null) is its run from before an interruption: replayed
  // when it had ended, its conversation continued when it had not.
  StepResult RunFixer(const Step& task, const Scope& scope,
                      const StepRef& task_ref, const std::string& workdir,
                      const AttemptRecord& failed,
                      const ResumedFixer* resumed);
  // The StepRef of `task`'s fix agent. REQUIRES: task.fix.
  StepRef FixerRef(const Step& task, const StepRef& task_ref) const;
  // A step (or fix agent's run) that ended before the interruption: its
  // stored record handed to the observers as finished, with what it spent
  // charged to `scope`'s budgets; its result.
  StepResult ReplayStored(const StepRef& ref, const Scope& scope,
                          const StepRecord& stored);
  // One attempt of a task: its run, and when that fails (not by its
  // timeout) and the task has `fix:`, the fix agent and the run again.
  // An attempt resumed at its fixer (`resumed`, see ResumedFix) starts
  // there.
  AttemptRecord RunAttemptWithFix(const Step& step, const Scope& scope,
                                  const StepRef& ref,
                                  const std::string& workdir,
                                  const Deadline& deadline, int attempt,
                                  const ResumedFixer* resumed);
  // The fixers of the attempts of a resumed step that ended before the
  // interruption (in `rec`), replayed in order.
  void ReplayEndedFixers(const Step& step, const Scope& scope,
                         const StepRef& ref, const StepRecord& rec);
  // The fixer's run of the resumed attempt in flight of `ref`, when it had
  // begun (ended, or with a stored conversation); null otherwise. `rec`
  // holds the attempts that ended before.
  const ResumedFixer* ResumedFix(const StepRef& ref,
                                 const StepRecord& rec) const;

  // Whether the job's deadline keeps work of `scope` from starting now
  // (never inside a hook).
  bool JobDeadlineStops(const Scope& scope) const;
  StepResult JobDeadlineResult(const std::string& next_step) const;
  // "job 'J' passed its timeout of 300ms".
  std::string JobTimedOut() const;
  // Tells the cell launcher, once, that the job's budget is spent.
  void TellCellsIfBudgetSpent();
  // Why `scope`'s token is cancelled: its fail_fast note, else "aborted".
  std::string CancelledWhy(const Scope& scope) const;
  // Records a step that never started (outcome `not started`, error `why`);
  // it fires no hook and is not added to `execution`.
  void NotStarted(const Step& step, const std::string& id,
                  const std::string& why, const std::string& cell);
  // Appends a finished leaf step to the record and tells the observer.
  void Finish(StepRecord record, bool add_to_execution);
  // Cell i of the across block `block` (id `block_id`, in scope `outer`),
  // sent to run elsewhere (ExecutorOptions::cells); `cell` is its scope
  // here. Its events come back through a CellRelay into this job's records.
  StepResult RunRemoteCell(const Step& block, const std::string& block_id,
                           size_t i, const Scope& outer, const Scope& cell);
  // Charges the budgets around a resumed cell (ids under `prefix`) with
  // what its steps in flight had spent before the interruption: their
  // conversations start again on the node.
  void ChargeInFlightSpent(const ResumeState& resume, const std::string& prefix,
                           const Scope& cell);
  // Where `target` is in the job's plan, as CellTask::path; nullopt when it
  // is not reached through blocks' steps (it is in a hook).
  std::optional<std::vector<size_t>> PathTo(const Step& target) const;
  friend class CellRelay;
  StepRef MakeRef(const Step& step, const std::string& id,
                  std::optional<HookKind> hook, const std::string& cell) const;
  std::string WorkDir(const StepRef& ref) const;
  // Asks for the working folder of steps[i] ahead of it (FolderMaker), when
  // it is a task, get or put that would get one on its first run.
  void FolderAhead(const std::vector<StepPtr>& steps, size_t i,
                   const std::vector<int>& visits, const std::string& id_prefix,
                   const Scope& scope);
  std::string ArtifactDir(const std::string& name) const;
  // Where a hook of `scope` runs: under the run's abort token (or, once the
  // run is aborted, the cleanup token only a second signal cancels), never
  // the block's, and past the job's deadline.
  Scope HookScope(const Scope& scope) const;

  Executor::Impl& ex_;
  const Job& job_;
  Clock& clock_;
  std::string job_dir_;
  Deadline job_deadline_;
  std::shared_ptr<agent::BudgetMeter> job_budget_;
  // The cell launcher was told the job's budget is spent.
  std::atomic<bool> told_budget_spent_{false};
  // Digests of the workspace's files, each unchanged file read once.
  ContentDigests digests_;
  std::mutex mu_;
  JobRecord record_;
  // The steps' working folders, made ahead of them where the job knows
  // which step comes next. Destroyed before the rest: its thread stops.
  FolderMaker folders_;
};

// The launcher's sandbox options for a resolved `sandbox:`, nullopt when
// off. writable_dir is left for the caller.
std::optional<SandboxOptions> ToSandboxOptions(const SandboxSpec& spec);

// Why a cached result fails `step`'s `assert:`, or nullopt when it holds
// (also when it has none). `exit_code` is a task's. An assert with a check
// that needs the live run (StepAssert::NeedsLiveRun) always misses: the
// result is set aside and the step runs.
std::optional<std::string> CachedAssertMiss(const Step& step,
                                            std::optional<int> exit_code,
                                            const std::string& output);

// Text helpers shared by the runners.
std::string TrimOutput(std::string_view s);
std::string SafeName(std::string_view name);

}  // namespace internal
}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_EXECUTOR_INTERNAL_H_
