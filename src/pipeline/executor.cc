#include "pipeline/executor.h"

#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>

#include "agent/spending.h"
#include "core/fiber.h"
#include "core/log.h"
#include "core/random.h"
#include "pipeline/executor_internal.h"

namespace steps::pipeline {

namespace fs = std::filesystem;
using internal::JobRunner;
using internal::Scope;
using internal::StepResult;

std::string NewRunId(const Clock& clock) {
  std::time_t t = std::chrono::system_clock::to_time_t(clock.WallNow());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  static std::atomic<uint32_t> counter{0};
  uint32_t bits =
      (static_cast<uint32_t>(RandomU64()) ^ (counter++ * 0x9e3779b9u)) & 0xffff;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%04x", bits);
  return std::string(stamp) + "-" + suffix;
}

bool IsRunId(const std::string& text) {
  // "YYYYMMDD-HHMMSS-xxxx"
  if (text.size() != 20 || text[8] != '-' || text[15] != '-') return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 15) continue;
    const char c = text[i];
    const bool digit = c >= '0' && c <= '9';
    if (i < 15 ? !digit : !(digit || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string TakenBy(const std::string& via) {
  // The user database's name for the uid, never $USER: a process may set
  // that to anyone, and approvers are checked against this name. A uid the
  // database does not know (a container's) is "uid#N", which no approvers
  // list can hold.
  std::string user;
  if (const passwd* pw = getpwuid(geteuid())) user = pw->pw_name;
  if (user.empty()) user = "uid#" + std::to_string(geteuid());
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0)
    std::snprintf(host, sizeof host, "unknown");
  std::string taken_by = user + "@" + host;
  if (!via.empty()) taken_by += " (via " + via + ")";
  return taken_by;
}

Executor::Impl::Impl(const ResolvedPlan& p, ExecutorOptions options)
    : plan(p), opts(std::move(options)) {
  if (opts.run_id.empty()) opts.run_id = NewRunId(*opts.clock);
  run_dir = (fs::path(opts.state_dir) / "runs" / opts.run_id).string();
}

Status Executor::Impl::SandboxReady() {
  std::call_once(sandbox_once_,
                 [&] { sandbox_status_ = CheckBwrap(*opts.launcher); });
  return sandbox_status_;
}

namespace internal {

std::optional<SandboxOptions> ToSandboxOptions(const SandboxSpec& spec) {
  if (!spec.bwrap()) return std::nullopt;
  SandboxOptions options;
  options.network = spec.network;
  return options;
}

}  // namespace internal

RunRecord Executor::Impl::Run(const std::vector<std::string>& jobs) {
  RunRecord run;
  run.id = opts.run_id;
  run.file = opts.file;
  // Before the clocks are read: the user lookup may take a while, and the
  // start read on the wall clock is the one measured on the steady one.
  run.taken_by = TakenBy(opts.via);
  run.started = opts.resume ? opts.resume->run_started : opts.clock->WallNow();
  SteadyTime start = opts.clock->Now();
  observer().OnRunStart(run);
  for (const Job& job : plan.pipeline().jobs) {
    if (!jobs.empty() &&
        std::find(jobs.begin(), jobs.end(), job.name) == jobs.end())
      continue;
    JobRunner runner(*this, job);
    JobRecord record = runner.Run();
    if (record.outcome == Outcome::kAborted) {
      run.outcome = Outcome::kAborted;
    } else if (record.outcome != Outcome::kSucceeded &&
               run.outcome == Outcome::kSucceeded) {
      run.outcome = Outcome::kFailed;
    }
    run.jobs.push_back(std::move(record));
    if (opts.abort.cancelled()) break;  // Later jobs are not started.
  }
  run.duration = std::chrono::duration_cast<Millis>(opts.clock->Now() - start);
  // A resumed run lasted from its first start, interruptions included.
  if (opts.resume) {
    run.duration =
        std::chrono::duration_cast<Millis>(opts.clock->WallNow() - run.started);
  }
  observer().OnRunEnd(run);
  return run;
}

Executor::Executor(const ResolvedPlan& plan, ExecutorOptions options)
    : impl_(std::make_unique<Impl>(plan, std::move(options))) {}
Executor::~Executor() = default;
RunRecord Executor::Run(const std::vector<std::string>& jobs) {
  return impl_->Run(jobs);
}
CellEnd Executor::RunCell(const CellTask& task) {
  // The cell's steps that ended before an interruption are replayed, as a
  // resumed run replays its own.
  ResumeState replay;
  if (!task.finished.empty() && !impl_->opts.resume) {
    for (const StepRecord& r : task.finished) replay.finished[r.ref.id] = r;
    impl_->opts.resume = &replay;
  }
  struct Restore {
    Impl& impl;
    const ResumeState* replay;
    ~Restore() {
      if (impl.opts.resume == replay) impl.opts.resume = nullptr;
    }
  } restore{*impl_, &replay};
  for (const Job& job : impl_->plan.pipeline().jobs) {
    if (job.name == task.job)
      return internal::JobRunner(*impl_, job).RunCell(task);
  }
  return {Outcome::kErrored, "the pipeline has no job '" + task.job + "'",
          true};
}

const std::string& Executor::run_id() const { return impl_->opts.run_id; }
std::string Executor::run_dir() const { return impl_->run_dir; }

namespace internal {

std::string TrimOutput(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string SafeName(std::string_view name) {
  std::string out;
  for (char c : name) {
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
            c == '_' || c == '.')
               ? c
               : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

JobRunner::JobRunner(Executor::Impl& ex, const Job& job)
    : ex_(ex),
      job_(job),
      clock_(*ex.opts.clock),
      job_dir_((fs::path(ex.run_dir) / SafeName(job.name)).string()) {
  record_.name = job.name;
  if (job.budget) {
    job_budget_ = std::make_shared<agent::BudgetMeter>(
        agent::BudgetLimit{job.budget->tokens, job.budget->usd}, "job");
  }
}

JobRecord JobRunner::Run() {
  record_.started = clock_.WallNow();
  SteadyTime start = clock_.Now();
  // A resumed job keeps its start, and the time it already spent counts
  // against its timeout.
  if (const ResumeState* resume = ex_.opts.resume) {
    if (auto it = resume->job_started.find(job_.name);
        it != resume->job_started.end())
      record_.started = it->second;
    if (auto it = resume->job_spent.find(job_.name);
        it != resume->job_spent.end())
      start -= it->second;
  }
  if (job_.timeout.has_value())
    job_deadline_ = Deadline::At(start + *job_.timeout);
  ex_.observer().OnJobStart(job_.name, job_deadline_.when());
  std::error_code ec;
  fs::create_directories(fs::path(job_dir_) / "artifacts", ec);
  Scope scope;
  scope.token = ex_.opts.abort.Child();
  if (job_budget_) scope.budgets.push_back(job_budget_);
  StepResult body;
  if (ec) {
    body = {Outcome::kErrored,
            "cannot create the job's folder " + job_dir_ + ": " + ec.message()};
    body.caused_by_error = true;
  } else {
    body = RunSequence(job_.plan, scope, "");
  }
  // The job's hooks follow the job's outcome: a step that errored fails
  // its job, so the job's on_failure fires (a job-level on_error never
  // does; the loader warns about one).
  if (body.outcome == Outcome::kErrored) {
    body.outcome = Outcome::kFailed;
    body.caused_by_error = true;
  }
  StepResult result = RunHooks(job_.hooks, body, scope, "job");
  record_.outcome = result.outcome;
  record_.error = result.error;
  record_.caused_by_error =
      result.caused_by_error && result.outcome == Outcome::kFailed;
  // A job ends succeeded, failed or aborted: an errored hook fails its job.
  if (record_.outcome == Outcome::kErrored) {
    record_.outcome = Outcome::kFailed;
    record_.caused_by_error = true;
  }
  record_.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  ex_.observer().OnJobEnd(record_);
  return record_;
}

CellEnd JobRunner::RunCell(const CellTask& task) {
  const Step* block = nullptr;
  const std::vector<StepPtr>* level = &job_.plan;
  for (size_t at : task.path) {
    if (at >= level->size()) {
      block = nullptr;
      break;
    }
    block = (*level)[at].get();
    level = &block->steps;
  }
  if (block == nullptr || block->kind != StepKind::kAcross) {
    return {
        Outcome::kErrored,
        "job '" + job_.name +
            "' has no across block where the cell "
            "names one (is the pipeline file the one the run started with?)",
        true};
  }
  const AcrossCells cells = AcrossCellsOf(*block);
  if (task.cell >= cells.picks.size()) {
    return {Outcome::kErrored,
            "the across block '" + block->name + "' has no cell " +
                std::to_string(task.cell + 1) + " (it has " +
                std::to_string(cells.picks.size()) +
                (cells.picks.size() == 1 ? " cell" : " cells") +
                "; is the pipeline file the one the run started with?)",
            true};
  }
  if (task.job_deadline) {
    job_deadline_ =
        Deadline::At(clock_.Now() + (*task.job_deadline - clock_.WallNow()));
  }
  std::error_code ec;
  fs::create_directories(fs::path(job_dir_) / "artifacts", ec);
  Scope scope;
  scope.token = ex_.opts.abort.Child();
  if (job_budget_) {
    job_budget_->Add(task.job_tokens_spent, task.job_usd_spent);
    if (const auto& elsewhere = ex_.opts.job_budget_elsewhere) {
      job_budget_->SetSpentElsewhere(
          [elsewhere, job = job_.name] { return elsewhere(job); });
    }
    scope.budgets.push_back(job_budget_);
  }
  scope.cell = task.outer_cell;
  if (task.outer_vars.is_object()) {
    for (const auto& [var, value] : task.outer_vars.items()) {
      scope.vars[var] = value;
      scope.var_names.insert(var);
    }
  }
  const StepResult r =
      RunSequence(block->steps, cells.ScopeOf(*block, task.cell, scope),
                  AcrossCells::Prefix(task.block_id, task.cell));
  return {r.outcome, r.error,
          r.caused_by_error || r.outcome == Outcome::kErrored};
}

void StopNote::Set(const std::string& why) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (why_.empty()) why_ = why;
}

std::string StopNote::Why() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!why_.empty()) return why_;
  }
  return outer_ ? outer_->Why() : "";
}

bool JobRunner::JobDeadlineStops(const Scope& scope) const {
  return !scope.in_hook && job_deadline_.Expired(clock_);
}

std::string JobRunner::JobTimedOut() const {
  if (!job_.timeout.has_value())
    return "job '" + job_.name + "' passed its deadline";
  return "job '" + job_.name + "' passed its timeout of " +
         FormatDuration(*job_.timeout);
}

std::string JobRunner::CancelledWhy(const Scope& scope) const {
  std::string why = scope.stop_note ? scope.stop_note->Why() : "";
  return why.empty() ? "aborted" : why;
}

void JobRunner::NotStarted(const Step& step, const std::string& id,
                           const std::string& why, const std::string& cell) {
  StepRecord rec;
  rec.ref = MakeRef(step, id, std::nullopt, cell);
  rec.outcome = Outcome::kNotStarted;
  rec.error = why;
  rec.started = clock_.WallNow();
  Finish(std::move(rec), false);
}

StepResult JobRunner::JobDeadlineResult(const std::string& next_step) const {
  StepResult r;
  r.outcome = Outcome::kFailed;
  r.job_level = true;
  r.error = JobTimedOut() + "; '" + next_step + "' was not started";
  return r;
}

StepRef JobRunner::MakeRef(const Step& step, const std::string& id,
                           std::optional<HookKind> hook,
                           const std::string& cell) const {
  StepRef ref;
  ref.id = job_.name + ":" + id;
  ref.job = job_.name;
  ref.name = step.name;
  ref.kind = step.kind;
  if (step.kind == StepKind::kAgent) ref.agent = step.agent;
  ref.hook = hook;
  ref.line = step.line;
  ref.cell = cell;
  return ref;
}

std::string JobRunner::WorkDir(const StepRef& ref) const {
  return (fs::path(job_dir_) / "work" /
          SafeName(ref.id.substr(job_.name.size() + 1) + "-" + ref.name))
      .string();
}

void JobRunner::FolderAhead(const std::vector<StepPtr>& steps, size_t i,
                            const std::vector<int>& visits,
                            const std::string& id_prefix, const Scope& scope) {
  if (i >= steps.size() || visits[i] > 0 || scope.in_hook) return;
  const Step& next = *steps[i];
  if (next.kind != StepKind::kTask && next.kind != StepKind::kGet &&
      next.kind != StepKind::kPut) {
    return;
  }
  folders_.Ahead(WorkDir(
      MakeRef(next, id_prefix + std::to_string(i + 1), std::nullopt,
              scope.cell)));
}

std::string JobRunner::ArtifactDir(const std::string& name) const {
  return (fs::path(job_dir_) / "artifacts" / SafeName(name)).string();
}

Scope JobRunner::HookScope(const Scope& scope) const {
  Scope s = scope;
  s.token = ex_.opts.abort.cancelled() ? ex_.opts.cleanup_abort.Child()
                                       : ex_.opts.abort.Child();
  s.in_hook = true;
  s.stop_note = nullptr;
  return s;
}

void JobRunner::Finish(StepRecord record, bool add_to_execution) {
  ex_.observer().OnStepEnd(record);
  std::lock_guard<std::mutex> lock(mu_);
  if (add_to_execution) record_.execution.push_back(record.ref.name);
  record_.steps.push_back(std::move(record));
}

StepResult JobRunner::RunSequence(const std::vector<StepPtr>& steps,
                                  const Scope& scope,
                                  const std::string& id_prefix) {
  StepResult last;
  // `to:` routing: how often each step of this sequence has run, and the
  // critique the next run of a step gets.
  std::vector<int> visits(steps.size(), 0);
  std::optional<std::string> critique;
  const int max_visits =
      job_.max_visits.has_value() ? *job_.max_visits : kDefaultMaxVisits;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = *steps[i];
    std::string id = id_prefix + std::to_string(i + 1);
    if (visits[i] > 0) id += "#" + std::to_string(visits[i] + 1);
    if (scope.token.cancelled()) {
      NotStarted(step, id, CancelledWhy(scope), scope.cell);
      return {Outcome::kAborted, "aborted before '" + step.name + "' started"};
    }
    // The job deadline is checked between steps, never during one.
    if (JobDeadlineStops(scope)) {
      NotStarted(step, id, JobTimedOut(), scope.cell);
      return JobDeadlineResult(step.name);
    }
    ++visits[i];
    FolderAhead(steps, i + 1, visits, id_prefix, scope);
    Scope step_scope = scope;
    step_scope.critique = std::move(critique);
    critique.reset();
    StepResult r = RunStep(step, step_scope, id, std::nullopt);
    if (!r.ok() && r.outcome == Outcome::kFailed && !r.job_level &&
        step.route_to) {
      size_t target = steps.size();
      for (size_t j = 0; j < steps.size(); ++j) {
        if (steps[j]->name == *step.route_to) target = j;
      }
      if (target < steps.size()) {
        if (visits[target] >= max_visits) {
          StepResult over;
          over.outcome = Outcome::kFailed;
          over.job_level = true;  // A job-level failure, like the deadline.
          over.error = "max_visits: '" + step.name + "' routed to '" +
                       *step.route_to + "', which has run " +
                       std::to_string(visits[target]) + " times (max_visits " +
                       std::to_string(max_visits) + ")";
          return over;
        }
        critique = r.output.empty() ? r.error : r.output;
        i = target - 1;  // The loop's ++i lands on the target.
        continue;
      }
    }
    if (!r.ok()) return r;
    last = std::move(r);
  }
  return last;
}

StepResult JobRunner::RunStep(const Step& step, const Scope& scope,
                              const std::string& id,
                              std::optional<HookKind> hook) {
  StepResult body;
  switch (step.kind) {
    case StepKind::kTask:
    case StepKind::kGet:
    case StepKind::kPut:
    case StepKind::kAgent:
      body = RunWork(step, scope, MakeRef(step, id, hook, scope.cell));
      break;
    case StepKind::kGate:
      body = RunGate(step, scope, MakeRef(step, id, hook, scope.cell));
      break;
    case StepKind::kDo:
      body = RunSequence(step.steps, scope, id + ".");
      break;
    case StepKind::kTry: {
      body = RunSequence(step.steps, scope, id + ".");
      // A try swallows the failure of its step, but not an abort or the job's
      // own deadline.
      if (body.outcome != Outcome::kAborted && !body.job_level)
        body = StepResult{};
      break;
    }
    case StepKind::kInParallel:
      body = RunParallel(step, scope, id);
      break;
    case StepKind::kAcross:
      body = RunAcross(step, scope, id);
      break;
  }
  if (body.job_level) return body;  // Not this step's outcome: no hooks.
  return RunHooks(step.hooks, std::move(body), scope, id);
}

StepResult JobRunner::RunHooks(const Hooks& hooks, StepResult body,
                               const Scope& scope, const std::string& id) {
  if (hooks.empty()) return body;
  // Hooks run to the end after a failure, the job's deadline or a sibling's
  // fail_fast; after an abort, until a second signal (HookScope).
  HookKind outcome_hook = HookKind::kOnSuccess;
  switch (body.outcome) {
    case Outcome::kSucceeded:
      outcome_hook = HookKind::kOnSuccess;
      break;
    case Outcome::kFailed:
      outcome_hook = HookKind::kOnFailure;
      break;
    case Outcome::kErrored:
      outcome_hook = HookKind::kOnError;
      break;
    case Outcome::kAborted:
      outcome_hook = HookKind::kOnAbort;
      break;
    case Outcome::kNotStarted:
      return body;  // Nothing ran: nothing to follow up or clean up.
  }
  if (const StepPtr& h = hooks.Get(outcome_hook)) {
    StepResult hr =
        RunStep(*h, HookScope(scope), id + "/" + HookKindName(outcome_hook),
                outcome_hook);
    // A failing on_success hook fails the step.
    if (outcome_hook == HookKind::kOnSuccess && !hr.ok()) {
      body.outcome = hr.outcome == Outcome::kAborted ? Outcome::kAborted
                                                     : Outcome::kFailed;
      body.error = "on_success hook '" + h->name + "' " +
                   std::string(OutcomeName(hr.outcome)) +
                   (hr.error.empty() ? "" : ": " + hr.error);
      body.caused_by_error =
          hr.caused_by_error || hr.outcome == Outcome::kErrored;
    }
  }
  if (const StepPtr& e = hooks.ensure) {
    StepResult er =
        RunStep(*e, HookScope(scope), id + "/ensure", HookKind::kEnsure);
    if (!er.ok() && body.ok()) {
      body.outcome = er.outcome == Outcome::kAborted ? Outcome::kAborted
                                                     : Outcome::kFailed;
      body.error = "ensure hook '" + e->name + "' " +
                   std::string(OutcomeName(er.outcome)) +
                   (er.error.empty() ? "" : ": " + er.error);
      body.caused_by_error =
          er.caused_by_error || er.outcome == Outcome::kErrored;
    }
  }
  return body;
}

// What a fan-out amounts to, from the units that ran: a job-level end
// first, then the first failure, the first error, the job's deadline
// stopping admission (`deadline_error`, empty when it did not), the first
// abort; else success.
static StepResult FoldFanOut(const std::vector<StepResult>& results,
                             const std::vector<bool>& ran,
                             const std::string& deadline_error) {
  StepResult out;
  const StepResult* first_failed = nullptr;
  const StepResult* first_errored = nullptr;
  const StepResult* first_aborted = nullptr;
  const StepResult* first_job_level = nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!ran[i]) continue;
    const StepResult& r = results[i];
    if (r.job_level && !first_job_level) first_job_level = &r;
    if (r.outcome == Outcome::kFailed && !first_failed && !r.job_level)
      first_failed = &r;
    if (r.outcome == Outcome::kErrored && !first_errored) first_errored = &r;
    if (r.outcome == Outcome::kAborted && !first_aborted) first_aborted = &r;
  }
  if (first_job_level) return *first_job_level;
  if (first_failed) {
    out = *first_failed;
  } else if (first_errored) {
    out = *first_errored;
    out.caused_by_error = true;
  } else if (!deadline_error.empty()) {
    out.outcome = Outcome::kFailed;
    out.job_level = true;
    out.error = deadline_error;
  } else if (first_aborted) {
    out = *first_aborted;
  }
  return out;
}

// Runs `worker` `n` times at once: once on the calling thread (or fiber),
// the rest as fibers of the shared pool, each one's waits (for a model's
// answer, a commit, a child process) parking it instead of holding a
// thread. Returns when all have returned. Where no more fiber stacks can
// be had (the process's mappings or memory run out), fewer run at once:
// the workers take units from one queue, so every unit still runs.
static void RunWorkers(size_t n, const std::function<void()>& worker) {
  if (n == 0) return;
  std::mutex mu;
  FiberCondVar done;
  size_t running = 0;
  auto one_done = [&] {
    std::lock_guard<std::mutex> lock(mu);
    // Notified under the lock: the waiter cannot return (and take `done`
    // with it) before this is over.
    if (--running == 0) done.NotifyAll();
  };
  FiberPool& pool = SharedFiberPool();
  for (size_t i = 1; i < n; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++running;
    }
    if (!pool.Spawn([&] {
          worker();
          one_done();
        })) {
      {
        std::lock_guard<std::mutex> lock(mu);
        --running;
      }
      LogEvent(LogLevel::kWarn, "fanout.narrowed",
               {{"in_flight", i},
                {"wanted", n},
                {"why", "no memory for more fiber stacks"}});
      break;
    }
  }
  worker();
  std::unique_lock<std::mutex> lock(mu);
  done.Wait(lock, [&] { return running == 0; });
}

StepResult JobRunner::FanOut(const FanOutUnits& units, const Scope& scope) {
  Scope block = scope;
  block.token = scope.token.Child();
  auto note = std::make_shared<StopNote>(scope.stop_note);
  block.stop_note = note;
  const size_t count = units.count;
  std::mutex mu;
  std::vector<StepResult> results(count);
  std::vector<bool> ran(count, false);
  std::atomic<size_t> next{0};
  std::atomic<bool> deadline_hit{false};
  auto worker = [&] {
    while (true) {
      size_t i = next.fetch_add(1);
      if (i >= count) return;
      // Every unit that is not run gets a record saying why.
      if (block.token.cancelled()) {
        units.not_started(i, CancelledWhy(block));
        continue;
      }
      // A fan-out is checked per unit of work: no unit is admitted once the
      // job's deadline has passed.
      if (JobDeadlineStops(scope)) {
        deadline_hit = true;
        units.not_started(i, JobTimedOut());
        continue;
      }
      if (std::optional<std::string> refused = units.refuse()) {
        units.not_started(i, *refused);
        continue;
      }
      StepResult r = units.run(i, block);
      std::lock_guard<std::mutex> lock(mu);
      ran[i] = true;
      if (units.fail_fast && !r.ok() && r.outcome != Outcome::kAborted &&
          !block.token.cancelled()) {
        // The note is written before the cancel, so whoever sees the
        // cancel reads it.
        note->Set("fail_fast: sibling " + units.label(i) + " " +
                  std::string(OutcomeName(r.outcome)));
        block.token.Cancel(CancelReason::kParent);
      }
      results[i] = std::move(r);
    }
  };
  RunWorkers(std::min(units.limit, count), worker);

  if (scope.token.cancelled()) return {Outcome::kAborted, "aborted"};
  return FoldFanOut(results, ran,
                    deadline_hit ? JobTimedOut() +
                                       " inside a fan-out; the rest were not "
                                       "admitted"
                                 : "");
}

StepResult JobRunner::RunParallel(const Step& step, const Scope& scope,
                                  const std::string& id) {
  const size_t n = step.steps.size();
  auto branch_id = [&](size_t i) { return id + "." + std::to_string(i + 1); };
  FanOutUnits units;
  units.count = n;
  units.limit = std::max<size_t>(
      step.limit.has_value() ? static_cast<size_t>(*step.limit) : n, 1);
  units.fail_fast = step.fail_fast;
  units.label = [&](size_t i) { return "'" + step.steps[i]->name + "'"; };
  units.refuse = [] { return std::nullopt; };
  units.run = [&](size_t i, const Scope& s) {
    return RunStep(*step.steps[i], s, branch_id(i), std::nullopt);
  };
  units.not_started = [&](size_t i, const std::string& why) {
    NotStarted(*step.steps[i], branch_id(i), why, scope.cell);
  };
  return FanOut(units, scope);
}

AcrossCells AcrossCellsOf(const Step& step) {
  // Cells: the cartesian product of every variable's values, first variable
  // slowest.
  AcrossCells cells;
  cells.picks.resize(1);
  cells.in_flight = 1;
  for (const AcrossVar& v : step.across) {
    std::vector<std::vector<size_t>> next;
    for (const auto& c : cells.picks) {
      for (size_t k = 0; k < v.values.size(); ++k) {
        next.push_back(c);
        next.back().push_back(k);
      }
    }
    cells.picks = std::move(next);
    cells.in_flight *=
        v.max_in_flight.has_value()
            ? std::min<size_t>(*v.max_in_flight,
                               std::max<size_t>(v.values.size(), 1))
            : std::max<size_t>(v.values.size(), 1);
  }
  return cells;
}

std::string AcrossCells::Values(const Step& step, size_t i,
                                const std::string& outer) const {
  std::string values = outer;
  for (size_t v = 0; v < step.across.size(); ++v) {
    if (!values.empty()) values += " ";
    values += step.across[v].var + "=" + step.across[v].values[picks[i][v]];
  }
  return values;
}

Scope AcrossCells::ScopeOf(const Step& step, size_t i,
                           const Scope& outer) const {
  Scope cell = outer;
  for (size_t v = 0; v < step.across.size(); ++v) {
    cell.vars[step.across[v].var] = step.across[v].values[picks[i][v]];
    cell.var_names.insert(step.across[v].var);
  }
  cell.cell = Values(step, i, outer.cell);
  return cell;
}

std::string AcrossCells::Prefix(const std::string& block_id, size_t i) {
  return block_id + ".c" + std::to_string(i + 1) + ".";
}

StepResult JobRunner::RunAcross(const Step& step, const Scope& scope,
                                const std::string& id) {
  const AcrossCells cells = AcrossCellsOf(step);
  std::shared_ptr<agent::BudgetMeter> across_budget;
  if (step.budget) {
    across_budget = std::make_shared<agent::BudgetMeter>(
        agent::BudgetLimit{step.budget->tokens, step.budget->usd}, "across");
  }
  auto cell_values = [&](size_t i) {
    return cells.Values(step, i, scope.cell);
  };
  auto cell_label = [&](size_t i) { return "cell " + cell_values(i); };
  auto cell_prefix = [&](size_t i) { return AcrossCells::Prefix(id, i); };
  std::atomic<size_t> not_admitted{0};
  FanOutUnits units;
  units.count = cells.picks.size();
  units.limit = std::max<size_t>(cells.in_flight, 1);
  units.fail_fast = step.fail_fast;
  units.label = cell_label;
  units.refuse = [&]() -> std::optional<std::string> {
    // A spent across budget degrades: no new cells; running ones finish.
    if (across_budget && across_budget->Spent()) {
      ++not_admitted;
      return "across budget spent: " + across_budget->DescribeSpent();
    }
    return std::nullopt;
  };
  const bool remote =
      ex_.plan.For(step).dials.runner.value == RunnerKind::kSlurm;
  units.run = [&](size_t i, const Scope& s) {
    Scope cell = cells.ScopeOf(step, i, s);
    if (across_budget) cell.charge_only.push_back(across_budget);
    if (remote) return RunRemoteCell(step, id, i, s, cell);
    return RunSequence(step.steps, cell, cell_prefix(i));
  };
  // A cell that never started is recorded as its first step, in the cell.
  units.not_started = [&](size_t i, const std::string& why) {
    if (!step.steps.empty())
      NotStarted(*step.steps.front(), cell_prefix(i) + "1", why,
                 cell_values(i));
  };
  StepResult r = FanOut(units, scope);
  if (not_admitted > 0) {
    LogEvent(LogLevel::kWarn, "across.budget_spent",
             {{"job", job_.name},
              {"step", step.name},
              {"admitted", cells.picks.size() - not_admitted},
              {"not_admitted", not_admitted.load()},
              {"budget", across_budget->DescribeSpent()}});
  }
  return r;
}

// The events of a cell run elsewhere, into this job: each is passed on to
// the run's observers as the executor's own would be; a step's end is
// recorded in the job (and what an agent step spent is charged to the
// budgets around the cell, as for a resumed step). Only the cell's own
// steps are taken (ids under its prefix, in this job): anything else on
// the stream is dropped and said once. Events come one at a time.
class CellRelay : public RunObserver {
 public:
  CellRelay(JobRunner& job, const Scope& cell, std::string prefix)
      : job_(job), cell_(cell), prefix_(std::move(prefix)) {}

  void OnStepStart(const StepRef& s, std::optional<SteadyTime> d) override {
    if (!Ours(s)) return;
    open_[s.id] = Open{s, job_.clock_.WallNow(), std::nullopt, {}};
    out().OnStepStart(s, d);
  }
  void OnAttemptStart(const StepRef& s, int attempt, int of,
                      std::optional<SteadyTime> d) override {
    if (!Ours(s)) return;
    if (auto it = open_.find(s.id); it != open_.end()) {
      it->second.attempt = AttemptRecord{};
      it->second.attempt->number = attempt;
      it->second.attempt->of = of;
      it->second.attempt->started = job_.clock_.WallNow();
    }
    out().OnAttemptStart(s, attempt, of, d);
  }
  void OnOutput(const StepRef& s, OutputStream stream,
                std::string_view line) override {
    if (Ours(s)) out().OnOutput(s, stream, line);
  }
  void OnLog(const StepRef& s, std::string_view line) override {
    if (Ours(s)) out().OnLog(s, line);
  }
  // A turn is charged to the budgets that stop conversations (the job's)
  // as it comes, as a conversation here charges them, and the launcher is
  // told once the job's budget is spent, so the job's other cells stop.
  // A turn that takes a budget past its cap fails its step, as here: the
  // node saw only its own cell's spending.
  void OnAgentTurn(const StepRef& s,
                   const agent::AgentTurnRecord& turn) override {
    if (!Ours(s)) return;
    const int64_t tokens = turn.prompt_tokens + turn.completion_tokens;
    Charged& c = charged_[s.id];
    c.tokens += tokens;
    c.usd += turn.usd;
    std::string exceeded =
        agent::Spending(std::nullopt, cell_.budgets).Charge(tokens, turn.usd);
    if (c.exceeded.empty()) c.exceeded = std::move(exceeded);
    job_.TellCellsIfBudgetSpent();
    out().OnAgentTurn(s, turn);
    // Stored now: a resume charges the job's budget with it, though the
    // conversation starts again on the node.
    out().OnCheckpoints(s, {});
  }
  void OnAttemptEnd(const StepRef& s, const AttemptRecord& a) override {
    if (!Ours(s)) return;
    if (auto it = open_.find(s.id); it != open_.end()) {
      it->second.attempt.reset();
      it->second.ended.push_back(a);
    }
    out().OnAttemptEnd(s, a);
  }
  void OnStepEnd(const StepRecord& rec) override {
    if (!Ours(rec.ref)) return;
    if (const std::optional<agent::AgentResult>& a = rec.agent) {
      // What the turns did not charge (a step replayed on resume sends no
      // turns); an across budget is charged once the conversation is over.
      const int64_t tokens = a->prompt_tokens + a->completion_tokens;
      const Charged c = charged_[rec.ref.id];
      for (const auto& meter : cell_.budgets) {
        meter->Add(std::max<int64_t>(tokens - c.tokens, 0),
                   std::max(a->usd - c.usd, 0.0));
      }
      for (const auto& meter : cell_.charge_only) meter->Add(tokens, a->usd);
      job_.TellCellsIfBudgetSpent();
    }
    StepRecord ended = rec;
    FailIfOverBudget(ended, charged_[rec.ref.id].exceeded);
    charged_.erase(rec.ref.id);
    open_.erase(rec.ref.id);
    ended_ = true;
    const bool ran = ended.outcome != Outcome::kNotStarted && !ended.ref.judge;
    job_.Finish(std::move(ended), ran);
  }

  bool any_ended() const { return ended_; }

  // A step of the cell that this relay failed for passing a budget (the
  // cell fails with it), or "".
  const std::string& over_budget() const { return over_budget_; }

  // Ends what the cell left open (steps on the node died, or said the
  // cell ended while a step had not): each open attempt and step ends as
  // the cell did, errored unless it was aborted; `end` becomes a failure
  // if it said otherwise.
  void CloseOpen(CellEnd& end) {
    if (open_.empty()) return;
    if (end.outcome == Outcome::kSucceeded) {
      end = {Outcome::kErrored,
             "the cell said it ended while '" + open_.begin()->second.ref.name +
                 "' had not",
             true};
    }
    const Outcome outcome = end.outcome == Outcome::kAborted
                                ? Outcome::kAborted
                                : Outcome::kErrored;
    const std::string why =
        end.error.empty() ? "the cell ended before this step did" : end.error;
    for (auto& [id, open] : open_) {
      StepRecord rec;
      rec.ref = open.ref;
      rec.outcome = outcome;
      rec.error = why;
      rec.started = open.started;
      rec.duration = std::chrono::duration_cast<Millis>(job_.clock_.WallNow() -
                                                        open.started);
      rec.attempts = std::move(open.ended);
      if (open.attempt) {
        open.attempt->outcome = outcome;
        open.attempt->error = why;
        open.attempt->duration = std::chrono::duration_cast<Millis>(
            job_.clock_.WallNow() - open.attempt->started);
        out().OnAttemptEnd(open.ref, *open.attempt);
        rec.attempts.push_back(*open.attempt);
      }
      ended_ = true;
      job_.Finish(std::move(rec), true);
    }
    open_.clear();
  }

  // Says once, after the cell, how many events were not the cell's.
  void SayForeign(const std::string& label) const {
    if (foreign_ == 0) return;
    LogEvent(
        LogLevel::kWarn, "cell.foreign_events",
        {{"cell", label},
         {"dropped", foreign_},
         {"effect", "events for steps outside the cell were not recorded"}});
  }

 private:
  struct Open {
    StepRef ref;
    WallTime started;
    std::optional<AttemptRecord> attempt;  // In flight.
    std::vector<AttemptRecord> ended;
  };
  bool Ours(const StepRef& s) {
    const bool ours = s.job == job_.job_.name && s.id.starts_with(prefix_);
    if (!ours) ++foreign_;
    return ours;
  }
  RunObserver& out() { return job_.ex_.observer(); }

  struct Charged {
    int64_t tokens = 0;
    double usd = 0;
    std::string exceeded;  // The first budget one of its turns passed.
  };

  // A step that succeeded on its node although one of its turns took the
  // job's budget past its cap (counting the other cells) fails here in the
  // words of a conversation that passed it here.
  void FailIfOverBudget(StepRecord& rec, const std::string& exceeded) {
    if (exceeded.empty() || rec.outcome != Outcome::kSucceeded) return;
    rec.outcome = Outcome::kFailed;
    rec.error =
        "agent: " + exceeded + ", counting the job's cells on other nodes";
    if (!rec.attempts.empty() &&
        rec.attempts.back().outcome == Outcome::kSucceeded) {
      rec.attempts.back().outcome = Outcome::kFailed;
      rec.attempts.back().error = rec.error;
    }
    if (over_budget_.empty()) over_budget_ = rec.error;
  }

  JobRunner& job_;
  const Scope& cell_;
  const std::string prefix_;
  std::map<std::string, Open> open_;
  std::map<std::string, Charged> charged_;  // By the turns, per step.
  std::string over_budget_;
  bool ended_ = false;
  int foreign_ = 0;
};

void JobRunner::TellCellsIfBudgetSpent() {
  if (!job_budget_ || !ex_.opts.cells || !job_budget_->Spent()) return;
  if (told_budget_spent_.exchange(true)) return;
  ex_.opts.cells->JobBudgetSpent(job_.name, job_budget_->DescribeSpent());
}

std::optional<std::vector<size_t>> JobRunner::PathTo(const Step& target) const {
  std::vector<size_t> path;
  std::function<bool(const std::vector<StepPtr>&)> find =
      [&](const std::vector<StepPtr>& steps) {
        for (size_t i = 0; i < steps.size(); ++i) {
          path.push_back(i);
          if (steps[i].get() == &target || find(steps[i]->steps)) return true;
          path.pop_back();
        }
        return false;
      };
  if (find(job_.plan)) return path;
  return std::nullopt;
}

void JobRunner::ChargeInFlightSpent(const ResumeState& resume,
                                    const std::string& prefix,
                                    const Scope& cell) {
  for (auto it = resume.in_flight_spent.lower_bound(prefix);
       it != resume.in_flight_spent.end() && it->first.starts_with(prefix);
       ++it) {
    const auto& [tokens, usd] = it->second;
    for (const auto& meter : cell.budgets) meter->Add(tokens, usd);
    for (const auto& meter : cell.charge_only) meter->Add(tokens, usd);
  }
  TellCellsIfBudgetSpent();
}

StepResult JobRunner::RunRemoteCell(const Step& block,
                                    const std::string& block_id, size_t i,
                                    const Scope& outer, const Scope& cell) {
  RemoteCell rc;
  rc.task.job = job_.name;
  rc.task.block_id = block_id;
  rc.task.cell = i;
  rc.task.outer_cell = outer.cell;
  rc.task.outer_vars = outer.vars;
  if (job_deadline_.is_set()) {
    rc.task.job_deadline =
        clock_.WallNow() + (job_deadline_.at() - clock_.Now());
  }
  if (const ResumeState* resume = ex_.opts.resume) {
    const std::string prefix =
        job_.name + ":" + AcrossCells::Prefix(block_id, i);
    for (auto it = resume->finished.lower_bound(prefix);
         it != resume->finished.end() && it->first.starts_with(prefix); ++it)
      rc.task.finished.push_back(it->second);
    ChargeInFlightSpent(*resume, prefix, cell);
  }
  if (job_budget_) {
    rc.task.job_tokens_spent = job_budget_->tokens();
    rc.task.job_usd_spent = job_budget_->usd();
  }
  rc.placement = ex_.plan.For(block).dials.slurm;
  // The job's deadline counts the queue: a cell not on a node by then
  // never starts.
  rc.placement.start_by = job_deadline_;
  rc.label = "cell " + cell.cell;
  rc.cancel = cell.token;
  rc.kill_grace = ex_.opts.kill_grace;
  CellEnd end;
  std::optional<std::vector<size_t>> path = PathTo(block);
  CellRelay relay(*this, cell,
                  job_.name + ":" + AcrossCells::Prefix(block_id, i));
  if (!ex_.opts.cells) {
    end = {Outcome::kErrored, "runner slurm: this run has no Slurm runner",
           true};
  } else if (!path) {
    end = {Outcome::kErrored,
           "an across block in a hook cannot send its cells to Slurm", true};
  } else {
    rc.task.path = std::move(*path);
    end = ex_.opts.cells->Run(rc, relay);
  }
  if (end.queued_past_job_deadline) {
    end.outcome = Outcome::kFailed;
    end.caused_by_error = false;
    end.error = JobTimedOut() + " while this cell's Slurm job was queued (" +
                end.error + ")";
  }
  relay.CloseOpen(end);
  relay.SayForeign(rc.label);
  if (!relay.over_budget().empty() && end.outcome == Outcome::kSucceeded)
    end = {Outcome::kFailed, relay.over_budget(), false};
  // A cell that ended before any of its steps did (it never started on a
  // node, or the node was lost first) is recorded as its first step.
  if (!relay.any_ended() && !block.steps.empty()) {
    StepRecord rec;
    rec.ref =
        MakeRef(*block.steps.front(), AcrossCells::Prefix(block_id, i) + "1",
                std::nullopt, cell.cell);
    rec.outcome =
        end.outcome == Outcome::kAborted || end.queued_past_job_deadline
            ? Outcome::kNotStarted
            : end.outcome;
    rec.error = end.error;
    rec.started = clock_.WallNow();
    Finish(std::move(rec), false);
  }
  StepResult r(end.outcome, end.error);
  r.caused_by_error = end.caused_by_error;
  return r;
}

}  // namespace internal
}  // namespace steps::pipeline
