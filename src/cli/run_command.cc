// `steps run FILE [--job NAME]... [--mock] [--no-cache]`
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "cli/terminal_printer.h"
#include "pipeline/loader.h"

namespace steps::cli {
namespace {

struct RunOptions {
  std::string file;
  std::vector<std::string> jobs;
  bool mock = false;
  bool no_cache = false;
  std::string state_dir = ".steps";
  bool plain = false;
};

int RunRun(const RunOptions& opts) {
  pipeline::LoadResult r = pipeline::LoadPipelineFile(opts.file);
  std::cerr << r.diagnostics.FormatAll();
  if (!r.pipeline) return kExitRefused;
  for (const std::string& job : opts.jobs) {
    if (!r.pipeline->FindJob(job)) {
      std::cerr << "steps run: no job named '" << job << "' in " << opts.file
                << "\n";
      return kExitUsage;
    }
  }
  if (opts.mock && !r.pipeline->mock) {
    std::cerr << "steps run: --mock needs a 'mock:' block in " << opts.file
              << " (see docs/mock.md)\n";
    return kExitUsage;
  }
  pipeline::ResolvedPlan plan(r.pipeline);
  bool live = !opts.plain && isatty(STDOUT_FILENO);
  TerminalPrinter printer(stdout, live, RealClock());
  RunSetup setup;
  setup.state_dir = opts.state_dir;
  setup.mock = opts.mock;
  setup.jobs = opts.jobs;
  setup.observer = &printer;
  setup.use_cache = !opts.no_cache;
  RunOutcome outcome = RunPlan(plan, setup);
  for (const std::string& p : outcome.mock_problems)
    std::cerr << "mock: " << p << "\n";
  int code = ExitCodeFor(outcome);
  if (!outcome.mock_problems.empty() && code == kExitOk) code = kExitJobFailed;
  return code;
}

}  // namespace

Command RunCommand() {
  return {
      "run", "Run the jobs of a pipeline file",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<RunOptions>();
        app.add_option("file", opts->file, "Pipeline file (YAML)")->required();
        app.add_option("--job", opts->jobs,
                       "Run only this job (repeatable); default: all");
        app.add_flag(
            "--mock", opts->mock,
            "Serve every agent source from the file's mock: block, in-process");
        app.add_flag("--no-cache", opts->no_cache,
                     "Run every step, even unchanged ones");
        app.add_option("--state-dir", opts->state_dir,
                       "Where runs keep working folders and records")
            ->capture_default_str();
        app.add_flag("--plain", opts->plain, "Plain lines even on a terminal");
        app.footer(
            "Exit codes: 0 all jobs succeeded; 1 a job failed; 2 a job failed "
            "because a\n"
            "step errored; 130/143 aborted by SIGINT/SIGTERM; 64 bad command "
            "line;\n"
            "65 the pipeline was refused at load.");
        return [opts] { return RunRun(*opts); };
      }};
}

}  // namespace steps::cli
