// `steps run FILE [--job NAME]... [--mock] [--no-cache]
//   [--ui [--ui-listen A] [--allow-host H]...] [--summary FILE]`
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/ci_report.h"
#include "cli/commands.h"
#include "cli/run_support.h"
#include "cli/terminal_printer.h"
#include "pipeline/loader.h"
#include "pipeline/source_check.h"
#include "ui/server.h"

namespace steps::cli {
namespace {

struct RunOptions {
  std::string file;
  std::vector<std::string> jobs;
  bool mock = false;
  bool no_cache = false;
  std::string state_dir = ".steps";
  bool plain = false;
  bool ui = false;
  std::string ui_listen = "127.0.0.1:8080";
  std::vector<std::string> allow_hosts;
  std::string summary;  // --summary FILE
};

int RunRun(const RunOptions& opts) {
  pipeline::LoadResult r = pipeline::LoadPipelineFile(opts.file);
  std::cerr << r.diagnostics.FormatAll();
  CiReport report("steps run " + opts.file);
  if (!r.pipeline) {
    report.AddRefusal(r.diagnostics);
    PublishCiReport(report, opts.summary);
    return kExitRefused;
  }
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
  // A source that cannot be served refuses the run before any step starts;
  // under --mock the mock: block serves every source.
  if (!opts.mock) {
    auto problems = pipeline::CheckSourceEnvironment(
        plan, opts.jobs, pipeline::ProcessEnvLookup());
    for (const pipeline::SourceProblem& p : problems) {
      r.diagnostics.Error(p.line, p.message);
      std::cerr << r.diagnostics.Format(r.diagnostics.all().back()) << "\n";
    }
    if (!problems.empty()) {
      std::cerr << "steps run: refused before the first step: "
                << problems.size()
                << (problems.size() == 1 ? " agent source" : " agent sources")
                << " cannot be served in this environment\n";
      return kExitRefused;
    }
  }
  EndOrphanedRuns(opts.state_dir);
  RunSetup setup;
  // --ui: the web UI of this run, served while it runs.
  std::unique_ptr<ui::UiServer> server;
  if (opts.ui) {
    Result<ui::ListenAddress> listen = ui::ParseListenAddress(opts.ui_listen);
    if (!listen.ok()) {
      std::cerr << "steps run: --ui-listen: " << listen.status().message()
                << "\n";
      return kExitUsage;
    }
    server = std::make_unique<ui::UiServer>(opts.state_dir);
    for (const std::string& h : opts.allow_hosts) server->AllowHost(h);
    if (Status s = server->Start(listen->host, listen->port); !s.ok()) {
      std::cerr << "steps run: --ui: " << s.message()
                << "; choose another with --ui-listen HOST:PORT\n";
      return kExitUsage;
    }
    setup.run_id = pipeline::NewRunId(RealClock());
    std::cerr << "steps run: watch this run at "
              << ui::BaseUrl(listen->host, server->port()) << "#"
              << setup.run_id << std::endl;
  }
  TerminalStyle style = StyleFor(STDOUT_FILENO, opts.plain);
  TerminalPrinter printer(stdout, style.live, RealClock(), style.color);
  setup.state_dir = opts.state_dir;
  setup.mock = opts.mock;
  setup.jobs = opts.jobs;
  setup.observer = &printer;
  setup.use_cache = !opts.no_cache;
  RunOutcome outcome = RunPlan(plan, setup);
  // The run's last line stays last on the terminal: no status block is
  // drawn under what follows.
  printer.Close();
  if (server) {
    // An open page gets to read how the run ended before the UI stops
    // (not after Ctrl-C or SIGTERM: those stop at once).
    if (outcome.signal == 0) server->WaitForWatchers(std::chrono::seconds(3));
    server->Stop();
    std::cerr << "steps run: the UI stopped with the run; `steps ui` serves "
                 "it again\n";
  }
  for (const std::string& p : outcome.mock_problems)
    std::cerr << "mock: " << p << "\n";
  report.AddRun(*r.pipeline, outcome.record);
  PublishCiReport(report, opts.summary);
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
            ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
        app.add_flag("--plain", opts->plain, "Plain lines even on a terminal");
        app.add_option("--summary", opts->summary,
                       "Also write a Markdown summary of the run to this file "
                       "(under GitHub Actions it also goes to "
                       "$GITHUB_STEP_SUMMARY)");
        app.add_flag("--ui", opts->ui,
                     "Serve the web UI of this run while it runs");
        app.add_option("--ui-listen", opts->ui_listen,
                       "HOST:PORT for --ui (port 0: any free); implies --ui")
            ->capture_default_str()
            ->each([opts](const std::string&) { opts->ui = true; });
        app.add_option("--allow-host", opts->allow_hosts,
                       "Also answer the UI for this Host name (NAME or "
                       "NAME:PORT; repeatable); implies --ui")
            ->each([opts](const std::string&) { opts->ui = true; });
        app.footer(
            "Exit codes: 0 all jobs succeeded; 1 a job failed; 2 a job failed "
            "because a\n"
            "step errored; 129/130/143 aborted by SIGHUP/SIGINT/SIGTERM; 64 bad command "
            "line;\n"
            "65 the pipeline was refused at load, or before the first step "
            "(an agent\n"
            "source whose key variable is not set).");
        return [opts] { return RunRun(*opts); };
      }};
}

}  // namespace steps::cli
