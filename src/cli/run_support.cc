#include "cli/run_support.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "agent/runner.h"
#include "cli/commands.h"
#include "cli/run_tracing.h"
#include "cli/signals.h"
#include "cli/slurm_cells.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/redact.h"
#include "mock_provider/script.h"
#include "pipeline/environment.h"
#include "pipeline/event_stream.h"
#include "pipeline/redacting.h"
#include "process/guardian.h"
#include "process/local_launcher.h"
#include "process/recorded_group.h"
#include "process/slurm_launcher.h"
#include "process/subreaper.h"
#include "store/cache.h"
#include "store/gates.h"
#include "store/process_groups.h"
#include "store/reader.h"
#include "store/recorder.h"
#include "store/run_lock.h"
#include "store/slurm_jobs.h"
#include "store/store.h"

namespace steps::cli {

namespace {

// Fault injection for chaos tests of resuming (docs/resume.md): with
// STEPS_CHAOS_KILL_AFTER_COMMITS=N, this process kills itself with SIGKILL
// right after its N-th store transaction is committed, before anything that
// waits for it goes on.
void InstallChaosKill(store::Store& db) {
  const char* text = std::getenv("STEPS_CHAOS_KILL_AFTER_COMMITS");
  if (text == nullptr || *text == '\0') return;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || n <= 0) {
    LogEvent(LogLevel::kWarn, "chaos.ignored",
             {{"STEPS_CHAOS_KILL_AFTER_COMMITS", text},
              {"error", "not a whole number of commits above 0"}});
    return;
  }
  db.SetAfterCommit([n](int64_t commits) {
    if (commits == n) raise(SIGKILL);
  });
}

}  // namespace

namespace {

// Held until the run is over: a later `steps run` that finds it free knows
// this run died and ends the process groups it recorded. Null (logged)
// when it cannot be taken.
std::unique_ptr<store::RunLock> LockRun(const std::string& state_dir,
                                        const std::string& run_id) {
  auto locked = store::RunLock::Acquire(state_dir, run_id);
  if (locked.ok()) return std::move(*locked);
  LogEvent(LogLevel::kWarn, "run.lock_failed",
           {{"error", locked.status().message()}});
  return nullptr;
}

// Ends what this run leaves running if this process dies without doing so
// itself (process/guardian.h); it holds the lock until that is done. Null
// (logged) when it cannot be started.
std::unique_ptr<RunGuardian> StartGuardian(const std::string& state_dir,
                                           const std::string& run_id,
                                           const store::RunLock* run_lock) {
  auto started =
      RunGuardian::Start({state_dir, run_id, std::to_string(getpid()),
                          run_lock ? "locked" : "unlocked"},
                         run_lock ? run_lock->fd() : -1);
  if (started.ok()) return std::move(*started);
  LogEvent(LogLevel::kWarn, "run.no_guardian",
           {{"error", started.status().message()}});
  return nullptr;
}

// The file's mock `gates:` over the run store's desk (`--mock`, `steps
// test`): a gate named there is decided as it opens, recorded as taken by
// this user via mock; the others wait for a person.
class MockGateDesk : public pipeline::GateDesk {
 public:
  MockGateDesk(pipeline::GateDesk& inner,
               std::map<std::string, pipeline::GateDecision> decisions)
      : inner_(inner), decisions_(std::move(decisions)) {}

  Status Open(const pipeline::StepRef& step,
              const pipeline::GateOpening& opening) override {
    if (Status s = inner_.Open(step, opening); !s.ok()) return s;
    auto it = decisions_.find(step.name);
    if (it == decisions_.end()) return Status::Ok();
    pipeline::GateVerdict v;
    v.decision = it->second;
    v.by = pipeline::TakenBy();
    v.via = "mock";
    v.at = std::chrono::system_clock::now();
    inner_.Settle(step, v);
    return Status::Ok();
  }
  std::optional<pipeline::GateVerdict> Look(
      const pipeline::StepRef& step) override {
    return inner_.Look(step);
  }
  pipeline::GateVerdict Settle(const pipeline::StepRef& step,
                               const pipeline::GateVerdict& ending) override {
    return inner_.Settle(step, ending);
  }
  Millis LookEvery() const override { return inner_.LookEvery(); }

 private:
  pipeline::GateDesk& inner_;
  const std::map<std::string, pipeline::GateDecision> decisions_;
};

// The run store (STATE_DIR/steps.db) and what writes to it: the recorder
// beside the printer, the step cache, the record of process groups.
// Members end in reverse order: the store last.
struct Recording {
  std::unique_ptr<store::Store> db;
  std::unique_ptr<store::RunRecorder> recorder;
  std::unique_ptr<store::StoreStepCache> cache;
  std::unique_ptr<store::ProcessGroupRecorder> groups;
  std::unique_ptr<store::SlurmJobRecorder> slurm_jobs;
  std::unique_ptr<pipeline::RedactingStepCache> masked_cache;
  std::unique_ptr<store::StoreGateDesk> gates;
  std::unique_ptr<MockGateDesk> mock_gates;  // Over `gates`, under --mock.
};

// Opens the run store; without it (logged) the run still runs, unrecorded.
// Process groups are recorded only under the run's lock: without it nobody
// could tell this run died.
Recording OpenRecording(const pipeline::ResolvedPlan& plan,
                        const RunSetup& setup, const std::string& run_id,
                        bool locked,
                        const std::shared_ptr<const Redactor>& redactor) {
  Recording r;
  auto opened = store::Store::Open(store::StorePath(setup.state_dir));
  if (!opened.ok()) {
    LogEvent(LogLevel::kWarn, "store.unavailable",
             {{"error", opened.status().message()}});
    return r;
  }
  r.db = std::move(*opened);
  InstallChaosKill(*r.db);
  r.recorder = std::make_unique<store::RunRecorder>(*r.db);
  r.recorder->SetPlan(store::OutlinePlan(plan, setup.jobs));
  if (!setup.file_text.empty())
    r.recorder->SetFile(Sha256Hex(setup.file_text), setup.file_text);
  if (setup.resume)
    r.recorder->SetResume(setup.resume->status, setup.resume->died_ms);
  if (locked) {
    r.groups = std::make_unique<store::ProcessGroupRecorder>(*r.db, run_id);
    r.slurm_jobs = std::make_unique<store::SlurmJobRecorder>(*r.db, run_id);
  }
  r.cache = std::make_unique<store::StoreStepCache>(
      *r.db, store::CacheDir(setup.state_dir), run_id, setup.use_cache);
  r.masked_cache =
      std::make_unique<pipeline::RedactingStepCache>(*r.cache, redactor);
  r.gates = std::make_unique<store::StoreGateDesk>(*r.db, run_id);
  if (setup.mock && !plan.pipeline().mock_gates.empty()) {
    r.mock_gates =
        std::make_unique<MockGateDesk>(*r.gates, plan.pipeline().mock_gates);
  }
  return r;
}

// Agents: served in process from the file's mock: block, or real (with
// their exchanges recorded for `--record`).
std::unique_ptr<agent::ConversationRunner> MakeAgents(
    const pipeline::ResolvedPlan& plan, const RunSetup& setup,
    const std::shared_ptr<const Redactor>& redactor, RunOutcome& outcome) {
  if (setup.mock && plan.pipeline().mock) {
    Result<MockScript> script = ParseMockScript(*plan.pipeline().mock);
    agent::AgentRunnerOptions options;
    options.prices = setup.prices;
    if (script.ok())
      return agent::MakeMockAgentRunner(std::move(*script), std::move(options));
  }
  agent::AgentRunnerOptions options;
  options.prices = setup.prices;
  if (setup.record) {
    outcome.recording = std::make_shared<agent::MockRecorder>(redactor);
    options.exchanges = outcome.recording.get();
  }
  return agent::MakeAgentRunner(std::move(options));
}

// What a mock script expected and did not get, masked.
void CollectMockFindings(const agent::ConversationRunner& agents,
                         const Redactor& redactor, RunOutcome& outcome) {
  for (const std::string& problem : agents.MockExpectationFailures())
    outcome.mock_problems.push_back(redactor.Redact(problem));
  for (const MockRequestRecord& request : agents.MockRequests()) {
    for (const std::string& f : request.expect_failures) {
      outcome.mock_misses.push_back(
          {request.step,
           redactor.Redact(f + " (" + DescribeRequest(request) + ")")});
    }
  }
}

// What of steps' environment its tasks do not get: provider keys, and a
// TRACESTATE that belongs to no trace of the run.
std::vector<std::string> WithheldVariables(const pipeline::Pipeline& pipeline,
                                           const RunTracing& tracing) {
  std::vector<std::string> withheld = pipeline::ProviderKeyVariables(pipeline);
  if (tracing.started_own_trace()) withheld.push_back("TRACESTATE");
  return withheld;
}

// How this run's across cells run on Slurm nodes: this binary and this
// run's file, state folder, folder, id and flags; the provider keys its
// agents use.
SlurmCellsOptions CellsOptions(const pipeline::ResolvedPlan& plan,
                               const RunSetup& setup,
                               const std::string& run_id) {
  namespace fs = std::filesystem;
  SlurmCellsOptions o;
  std::error_code ec;
  o.steps_binary = fs::read_symlink("/proc/self/exe", ec).string();
  o.file = fs::absolute(plan.pipeline().file, ec).string();
  o.state_dir = fs::absolute(setup.state_dir, ec).string();
  o.working_dir = fs::current_path(ec).string();
  o.run_id = run_id;
  if (setup.mock) o.flags.push_back("--mock");
  if (!setup.prices_file.empty()) {
    o.flags.push_back("--prices");
    o.flags.push_back(fs::absolute(setup.prices_file, ec).string());
  }
  // The file's bytes as loaded (or, for `steps test`, as they are now).
  if (!setup.file_text.empty()) {
    o.file_sha256 = Sha256Hex(setup.file_text);
  } else if (plan.pipeline().file != "-") {
    if (Result<std::string> text = ReadPipelineBytes(plan.pipeline().file);
        text.ok())
      o.file_sha256 = Sha256Hex(*text);
  }
  for (const std::string& name :
       pipeline::ProviderKeyVariables(plan.pipeline())) {
    if (const char* value = std::getenv(name.c_str())) o.keys[name] = value;
  }
  return o;
}

// On a Slurm node: each attempt of the cell's steps says which job and
// node ran it (Slurm's SLURM_JOB_ID and SLURMD_NODENAME), so that the
// sending run's `Taken by:` names them as for a step's own job.
class SlurmStamp : public pipeline::RunObserver {
 public:
  // `sent`: when the cell was handed to Slurm; its queue time runs from
  // there to now (the start of steps on the node).
  SlurmStamp(pipeline::RunObserver& next, std::optional<WallTime> sent)
      : next_(next) {
    const char* job = std::getenv("SLURM_JOB_ID");
    const char* node = std::getenv("SLURMD_NODENAME");
    if (job != nullptr && *job != '\0') {
      Millis queued(0);
      if (sent) {
        queued = std::max(Millis(0), std::chrono::duration_cast<Millis>(
                                         RealClock().WallNow() - *sent));
        // A queue of more than a year is a clock that disagrees: unknown.
        if (queued > std::chrono::hours(24 * 366)) queued = Millis(0);
      }
      stamp_ = pipeline::SlurmAttempt{job, node != nullptr ? node : "", queued};
    }
  }
  void OnStepStart(const pipeline::StepRef& s,
                   std::optional<SteadyTime> d) override {
    next_.OnStepStart(s, d);
  }
  void OnAttemptStart(const pipeline::StepRef& s, int attempt, int of,
                      std::optional<SteadyTime> d) override {
    next_.OnAttemptStart(s, attempt, of, d);
  }
  void OnOutput(const pipeline::StepRef& s, OutputStream stream,
                std::string_view line) override {
    next_.OnOutput(s, stream, line);
  }
  void OnLog(const pipeline::StepRef& s, std::string_view line) override {
    next_.OnLog(s, line);
  }
  void OnAgentTurn(const pipeline::StepRef& s,
                   const agent::AgentTurnRecord& turn) override {
    next_.OnAgentTurn(s, turn);
  }
  void OnAttemptEnd(const pipeline::StepRef& s,
                    const pipeline::AttemptRecord& a) override {
    pipeline::AttemptRecord stamped = a;
    Stamp(stamped);
    next_.OnAttemptEnd(s, stamped);
  }
  void OnStepEnd(const pipeline::StepRecord& r) override {
    pipeline::StepRecord stamped = r;
    for (pipeline::AttemptRecord& a : stamped.attempts) Stamp(a);
    next_.OnStepEnd(stamped);
  }

 private:
  void Stamp(pipeline::AttemptRecord& a) const {
    if (stamp_ && !a.slurm) a.slurm = stamp_;
  }
  pipeline::RunObserver& next_;
  std::optional<pipeline::SlurmAttempt> stamp_;
};

}  // namespace

pipeline::CellEnd RunCellHere(const pipeline::ResolvedPlan& plan,
                              const RunSetup& setup,
                              const pipeline::CellTask& task, std::FILE* out) {
  const pipeline::Pipeline& pipeline = plan.pipeline();
  AddProcessSecretsFromEnvironment(pipeline::SecretVariables(pipeline));
  const std::shared_ptr<const Redactor> redactor = ProcessRedactor();
  if (Status s = BecomeChildSubreaper(); !s.ok()) {
    LogEvent(LogLevel::kWarn, "process.no_subreaper", {{"error", s.message()}});
  }
  pipeline::EventWriter writer(
      [out](std::string_view line) {
        std::fwrite(line.data(), 1, line.size(), out);
        std::fputc('\n', out);
        std::fflush(out);
      },
      RealClock());
  SlurmStamp stamped(writer, task.sent);
  pipeline::RedactingObserver masked(stamped, redactor);
  pipeline::ExecutorOptions opts;
  opts.state_dir = setup.state_dir;
  opts.file = pipeline.file;
  opts.run_id = setup.run_id;
  opts.observer = &masked;
  // The run that sent the cell says when the job's budget is spent.
  opts.job_budget_elsewhere = [state_dir = setup.state_dir,
                               run_id = setup.run_id](const std::string& job) {
    return ReadJobBudgetMarker(JobBudgetMarker(state_dir, run_id, job));
  };
  LocalProcessLauncher launcher(
      RealClock(),
      CurrentEnvironmentWithout(pipeline::ProviderKeyVariables(pipeline)));
  opts.launcher = &launcher;
  RunOutcome outcome;
  std::unique_ptr<agent::ConversationRunner> agents =
      MakeAgents(plan, setup, redactor, outcome);
  opts.agents = agents.get();
  // Slurm's TERM reaches this process and its job script, which passes it
  // on: one abort, not an abort and a cut of the cell's hooks.
  SignalWatcher signals(opts.abort, opts.cleanup_abort,
                        std::chrono::milliseconds(2000));
  pipeline::Executor executor(plan, opts);
  pipeline::CellEnd end = executor.RunCell(task);
  end.error = redactor->Redact(end.error);
  CollectMockFindings(*agents, *redactor, outcome);
  for (const std::string& p : outcome.mock_problems)
    LogEvent(LogLevel::kWarn, "mock.unmet", {{"problem", p}});
  writer.WriteCellEnd(end);
  return end;
}

int ExitCodeForCell(const pipeline::CellEnd& end) {
  switch (end.outcome) {
    case Outcome::kSucceeded:
      return kExitOk;
    case Outcome::kAborted:
      return 130;
    case Outcome::kErrored:
      return kExitStepErrored;
    default:
      return end.caused_by_error ? kExitStepErrored : kExitJobFailed;
  }
}

RunOutcome RunPlan(const pipeline::ResolvedPlan& plan, const RunSetup& setup) {
  // Secrets (docs/secrets.md): the values of the pipeline's secret
  // variables are masked in everything below, and provider keys reach a
  // child process only when an `env:` entry passes them.
  const pipeline::Pipeline& pipeline = plan.pipeline();
  AddProcessSecretsFromEnvironment(pipeline::SecretVariables(pipeline));
  const std::shared_ptr<const Redactor> redactor = ProcessRedactor();
  pipeline::ExecutorOptions opts;
  opts.state_dir = setup.state_dir;
  opts.file = plan.pipeline().file;
  opts.via = setup.via;
  opts.run_id =
      setup.run_id.empty() ? pipeline::NewRunId(RealClock()) : setup.run_id;
  if (setup.resume) {
    opts.run_id = setup.resume->run_id;
    opts.resume = &setup.resume->state;
  }
  // Whatever a task leaves behind outside its process group is re-parented
  // to us, to be ended with its step (process/subreaper.h).
  if (Status s = BecomeChildSubreaper(); !s.ok()) {
    LogEvent(LogLevel::kWarn, "process.no_subreaper", {{"error", s.message()}});
  }
  const std::shared_ptr<store::RunLock> run_lock =
      setup.lock ? setup.lock : LockRun(setup.state_dir, opts.run_id);
  // Declared after the lock: it says the run ended, and is reaped, first.
  const std::unique_ptr<RunGuardian> guardian =
      StartGuardian(setup.state_dir, opts.run_id, run_lock.get());
  pipeline::ObserverList observers;
  if (setup.observer) observers.Add(setup.observer);
  Recording recording =
      OpenRecording(plan, setup, opts.run_id, run_lock != nullptr, redactor);
  if (recording.recorder) observers.Add(recording.recorder.get());
  // The run's trace, when the environment names a collector.
  RunTracing tracing(opts.run_id);
  if (tracing.observer()) observers.Add(tracing.observer());
  opts.trace = tracing.run_context();
  // What a dead run left running ends before any step runs (again). Its
  // writes wait for a busy store as a reader's do.
  if (recording.db) {
    EndOrphanedRuns(*recording.db, setup.state_dir,
                    run_lock ? opts.run_id : std::string());
  }
  // A store another process holds is waited for, until the run is
  // interrupted (Store::WaitForLocksUntil).
  if (recording.db) recording.db->WaitForLocksUntil(opts.abort);
  opts.cache = recording.masked_cache.get();
  opts.gates = recording.mock_gates
                   ? static_cast<pipeline::GateDesk*>(recording.mock_gates.get())
                   : recording.gates.get();
  // Every observer (printer, recorder) sees the run through the mask.
  pipeline::RedactingObserver masked(observers, redactor);
  opts.observer = &masked;
  LocalLauncherOptions launcher_options;
  launcher_options.groups = recording.groups.get();
  const std::vector<std::string> task_env =
      CurrentEnvironmentWithout(WithheldVariables(pipeline, tracing));
  LocalProcessLauncher launcher(RealClock(), task_env, launcher_options);
  opts.launcher = &launcher;
  // Steps whose runner is slurm: their job files go under the state folder,
  // which the nodes must see (docs/slurm.md).
  SlurmLauncherOptions slurm_options;
  slurm_options.spool_dir =
      (std::filesystem::absolute(setup.state_dir) / "slurm").string();
  slurm_options.jobs = recording.slurm_jobs.get();
  slurm_options.tag = SlurmRunTag(opts.run_id);
  // sbatch, scontrol and scancel are short and bounded: they need no
  // recording as a step's processes do. sbatch hands its environment to
  // the job: the one tasks get, keys withheld.
  LocalProcessLauncher slurm_commands(RealClock(), task_env);
  SlurmLauncher slurm(slurm_commands, RealClock(), slurm_options);
  opts.slurm = &slurm;
  SlurmCells cells(slurm, CellsOptions(plan, setup, opts.run_id));
  opts.cells = &cells;
  RunOutcome outcome;
  std::unique_ptr<agent::ConversationRunner> agents =
      MakeAgents(plan, setup, redactor, outcome);
  opts.agents = agents.get();
  SignalWatcher signals(opts.abort, opts.cleanup_abort);
  pipeline::Executor executor(plan, opts);
  outcome.record = executor.Run(setup.jobs);
  if (recording.slurm_jobs) recording.slurm_jobs->Finish();
  tracing.Finish(outcome.record.duration, opts.abort);
  if (guardian && guardian->Lost()) {
    LogEvent(LogLevel::kWarn, "run.guardian_lost",
             {{"run", opts.run_id},
              {"error",
               "the run's guardian exited early: had steps died, "
               "nothing would have ended what the run started"}});
  }
  pipeline::RedactRecord(*redactor, outcome.record);
  outcome.signal = signals.first_signal();
  CollectMockFindings(*agents, *redactor, outcome);
  return outcome;
}

namespace {

// Whether the run of recorded group `g` may still be running. Its lock
// decides: held, it is; free, it died. A run that ended removed its lock
// file (and a hand may have): then its recorded process decides, as for
// `steps runs` (store::RunProcessAlive), so that a group whose row a busy
// store kept from being deleted as the run ended is not kept `running` for
// ever. A run with no row counts as alive.
template <typename Recorded>
bool RunMayBeAlive(const std::string& state_dir, const Recorded& g) {
  std::error_code ec;
  if (std::filesystem::exists(store::RunLockPath(state_dir, g.run_id), ec))
    return store::RunIsLocked(state_dir, g.run_id);
  if (g.host.empty()) return true;
  return store::RunProcessAlive(state_dir, g.run_id, g.host, g.pid,
                                g.pid_start);
}

// Cancels the Slurm jobs dead runs left queued or running.
void CancelOrphanedSlurmJobs(store::Store& db, const std::string& state_dir,
                             const std::string& own_run) {
  Result<std::vector<store::RecordedSlurmJob>> jobs =
      store::QueuedSlurmJobs(db);
  if (!jobs.ok()) {
    LogEvent(LogLevel::kWarn, "run.orphans_unchecked",
             {{"error", jobs.status().message()}});
    return;
  }
  size_t i = 0;
  while (i < jobs->size()) {
    const std::string run_id = (*jobs)[i].run_id;
    const bool alive =
        run_id != own_run && RunMayBeAlive(state_dir, (*jobs)[i]);
    std::vector<store::RecordedSlurmJob> dead;
    for (; i < jobs->size() && (*jobs)[i].run_id == run_id; ++i) {
      if (!alive) dead.push_back((*jobs)[i]);
    }
    if (dead.empty()) continue;
    store::CancelRecordedSlurmJobs(db, dead);
    LogEvent(LogLevel::kWarn, "run.orphans_cancelled", {{"run", run_id}});
  }
}

}  // namespace

void EndOrphanedRuns(store::Store& db, const std::string& state_dir,
                     const std::string& own_run) {
  CancelOrphanedSlurmJobs(db, state_dir, own_run);
  Result<std::vector<store::RecordedGroup>> groups = store::RunningGroups(db);
  if (!groups.ok()) {
    LogEvent(LogLevel::kWarn, "run.orphans_unchecked",
             {{"error", groups.status().message()}});
    return;
  }
  // Rows come ordered by run: one decision and one log line per run.
  size_t i = 0;
  while (i < groups->size()) {
    const std::string run_id = (*groups)[i].run_id;
    // Our own lock would make the run read as alive: no step of this
    // process has started yet, so its groups are a dead process's.
    const bool alive =
        run_id != own_run && RunMayBeAlive(state_dir, (*groups)[i]);
    int killed = 0;
    for (; i < groups->size() && (*groups)[i].run_id == run_id; ++i) {
      if (alive) continue;
      const store::RecordedGroup& g = (*groups)[i];
      bool was_ours = KillRecordedGroup(g.group) == RecordedGroupEnd::kKilled;
      if (was_ours) ++killed;
      store::MarkGroup(db, g, was_ours ? "killed" : "gone");
    }
    if (killed > 0) {
      LogEvent(LogLevel::kWarn, "run.orphans_killed",
               {{"run", run_id}, {"groups", killed}});
    }
  }
}

int ExitCodeFor(const RunOutcome& outcome) {
  if (outcome.signal == SIGINT) return 130;
  if (outcome.signal == SIGTERM) return 143;
  if (outcome.signal == SIGHUP) return 129;
  bool failed = false, errored = false;
  for (const pipeline::JobRecord& job : outcome.record.jobs) {
    if (job.outcome == Outcome::kAborted) return 130;
    if (job.outcome != Outcome::kSucceeded) failed = true;
    if (job.caused_by_error) errored = true;
  }
  if (errored) return kExitStepErrored;
  return failed ? kExitJobFailed : kExitOk;
}

}  // namespace steps::cli
