// `steps resume [RUN] [--state-dir DIR] [--fresh-deadlines] [--mock]
//   [--plain]`, and what `steps run --resume-if-interrupted` shares with it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/prices_file.h"
#include "cli/run_support.h"
#include "cli/runner_option.h"
#include "cli/terminal_printer.h"
#include "core/clock.h"
#include "core/duration.h"
#include "pipeline/loader.h"
#include "store/resume.h"
#include "store/run_lock.h"
#include "store/store.h"

namespace steps::cli {

Result<std::string> ReadPipelineBytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return NotFound("cannot read the pipeline file " + file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// How long a resume waits for a run's lock: a run that was just killed
// stays held by its guardian while it ends what the run left running (at
// most five seconds, process/guardian.h) and records it.
constexpr Millis kResumeLockWait{10000};

}  // namespace

Result<store::ResumePoint> FindResumePoint(const std::string& state_dir,
                                           const std::string& run,
                                           const std::string& file,
                                           bool fresh_deadlines) {
  auto opened = store::Store::OpenExisting(store::StorePath(state_dir));
  if (!opened.ok()) return opened.status();
  Result<std::string> picked = store::PickResumableRun(**opened, run, file);
  if (!picked.ok()) return picked.status();
  // The run is resumed under its lock, like any run, and read once the
  // lock is held: whoever held it before (the dead run's guardian
  // recording what it ended, another resume that ran it) has written all
  // it will by then.
  const std::string id = *picked;
  std::error_code ec;
  const bool had_file =
      std::filesystem::exists(store::RunLockPath(state_dir, id), ec);
  Result<std::unique_ptr<store::RunLock>> lock =
      store::RunLock::Acquire(state_dir, id);
  if (!lock.ok() && lock.status().code() == StatusCode::kUnavailable) {
    std::cerr << "steps: run " << id
              << " is held by another process (a run just killed stays "
                 "held while its guardian ends what it left running); "
                 "waiting up to "
              << FormatDuration(kResumeLockWait) << "\n";
    lock = store::RunLock::AcquireWithin(state_dir, id, kResumeLockWait,
                                         RealClock());
    if (!lock.ok() && lock.status().code() == StatusCode::kUnavailable) {
      return Status(StatusCode::kUnavailable,
                    lock.status().message() +
                        ": a process of the run still runs (here, or on a "
                        "machine sharing this folder), or another resume "
                        "runs it");
    }
  }
  // A lock that cannot be taken at all (no locks on this filesystem, no
  // permission) is what it is for any run: RunPlan tries again and warns
  // (run.lock_failed), and the run goes on without it.
  Result<store::ResumePoint> point =
      store::LoadResumePoint(**opened, id, "", fresh_deadlines);
  if (!lock.ok()) return point;
  // A run that died left its lock file, and keeps it until it runs again.
  // A file this resume made is not the run's (an aborted run removed its
  // own; a run another resume ran to its end, too): it goes.
  (*lock)->KeepFile(had_file &&
                    (point.ok() ||
                     point.status().code() != StatusCode::kInvalidArgument));
  if (point.ok()) point->lock = std::move(*lock);
  return point;
}

int ResumeRun(const ResumeOptions& opts, const store::ResumePoint& point) {
  Result<std::string> text = ReadPipelineBytes(point.file);
  if (!text.ok()) {
    std::cerr << "steps resume: run " << point.run_id << ": "
              << text.status().message()
              << " (resume runs from the folder the run started in)\n";
    return kExitRefused;
  }
  if (std::string change = store::DescribeFileChange(point, *text);
      !change.empty()) {
    std::cerr << "steps resume: run " << point.run_id
              << " cannot be resumed: its pipeline file changed since it "
                 "started\n  "
              << change
              << "\nRestore the file to resume the run, or start a new run "
                 "with `steps run "
              << point.file << "`.\n";
    return kExitRefused;
  }
  pipeline::LoadResult r = pipeline::LoadPipelineFile(point.file);
  std::cerr << r.diagnostics.FormatAll();
  if (!r.pipeline) return kExitRefused;
  pipeline::ResolvedPlan plan(r.pipeline, PlanOptionsFor(opts.runner));
  std::cerr << "steps resume: run " << point.run_id << " (" << point.status
            << "): " << point.state.finished.size()
            << (point.state.finished.size() == 1 ? " step" : " steps")
            << " ended before and will not run again\n";
  TerminalStyle style = StyleFor(STDOUT_FILENO, opts.plain);
  TerminalPrinter printer(stdout, style.live, RealClock(), style.color);
  RunSetup setup;
  setup.prices = opts.price_table;
  setup.state_dir = opts.state_dir;
  setup.mock = opts.mock;
  setup.jobs = point.jobs;
  setup.observer = &printer;
  setup.use_cache = false;
  setup.file_text = *text;
  setup.resume = &point;
  // Started again, the run removes its lock file as it ends, as any run.
  if (point.lock) point.lock->KeepFile(false);
  setup.lock = point.lock;
  RunOutcome outcome = RunPlan(plan, setup);
  printer.Close();
  for (const std::string& p : outcome.mock_problems)
    std::cerr << "mock: " << p << "\n";
  int code = ExitCodeFor(outcome);
  if (!outcome.mock_problems.empty() && code == kExitOk) code = kExitJobFailed;
  return code;
}

namespace {

int RunResume(ResumeOptions opts, const std::string& run) {
  Result<std::shared_ptr<const agent::PriceTable>> prices =
      LoadPrices(opts.prices);
  if (!prices.ok()) {
    std::cerr << "steps resume: --prices " << prices.status().message() << "\n";
    return kExitUsage;
  }
  opts.price_table = *prices;
  Result<store::ResumePoint> point =
      FindResumePoint(opts.state_dir, run, "", opts.fresh_deadlines);
  if (!point.ok()) {
    std::cerr << "steps resume: " << point.status().message() << "\n";
    return point.status().code() == StatusCode::kNotFound ? kExitUsage
                                                          : kExitRefused;
  }
  return ResumeRun(opts, *point);
}

}  // namespace

Command ResumeCommand() {
  return {
      "resume", "Continue an interrupted or aborted run where it stopped",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<ResumeOptions>();
        auto run = std::make_shared<std::string>();
        app.add_option("run", *run,
                       "The run id (or a unique prefix); default: the "
                       "latest interrupted or aborted run");
        app.add_option("--state-dir", opts->state_dir,
                       "Where runs keep working folders and records")
            ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
        app.add_flag("--fresh-deadlines", opts->fresh_deadlines,
                     "Give resumed jobs and steps their whole timeouts "
                     "again; default: what the run already spent counts");
        app.add_flag("--mock", opts->mock,
                     "Serve every agent source from the file's mock: block, "
                     "in-process (as `steps run --mock`)");
        app.add_flag("--plain", opts->plain, "Plain lines even on a terminal");
        AddRunnerOption(app, opts->runner);
        app.add_option("--prices", opts->prices, kPricesHelp)
            ->envname("STEPS_PRICES")
            ->type_name("FILE");
        app.footer(
            "The run continues under its own id: steps that ended are not "
            "run again, a\n"
            "step in flight restarts, an agent conversation continues from "
            "its last\n"
            "stored point (docs/resume.md). The pipeline file must be "
            "unchanged.\n"
            "Exit codes: as `steps run`; 64 no such run, or none to resume; "
            "65 the run\n"
            "cannot be resumed (its pipeline file changed or is missing, or "
            "it did not\n"
            "stop early).");
        return [opts, run] { return RunResume(*opts, *run); };
      }};
}

}  // namespace steps::cli
