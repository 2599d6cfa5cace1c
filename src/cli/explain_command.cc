// `steps explain FILE [--job NAME]...`
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/runner_option.h"
#include "pipeline/explain.h"
#include "pipeline/loader.h"

namespace steps::cli {

ExplainReport ExplainFile(const std::string& file,
                          const std::vector<std::string>& jobs,
                          const pipeline::PlanOptions& plan_options) {
  ExplainReport report;
  pipeline::LoadResult r = pipeline::LoadPipelineFile(file);
  report.diagnostics = r.diagnostics.FormatAll();
  if (!r.pipeline) {
    report.exit_code = kExitRefused;
    return report;
  }
  for (const std::string& job : jobs) {
    if (!r.pipeline->FindJob(job)) {
      report.error = "no job named '" + job + "' in " + file;
      report.exit_code = kExitUsage;
      return report;
    }
  }
  pipeline::ResolvedPlan plan(r.pipeline, plan_options);
  report.text = pipeline::Explain(plan, jobs);
  report.exit_code = kExitOk;
  return report;
}

namespace {

struct ExplainOptions {
  std::string file;
  std::vector<std::string> jobs;
  std::string runner;
};

int RunExplain(const ExplainOptions& opts) {
  ExplainReport report =
      ExplainFile(opts.file, opts.jobs, PlanOptionsFor(opts.runner));
  std::cerr << report.diagnostics;
  if (!report.error.empty())
    std::cerr << "steps explain: " << report.error << "\n";
  std::cout << report.text;
  return report.exit_code;
}

}  // namespace

Command ExplainCommand() {
  return {
      "explain",
      "Show every step's resolved limits, where each came from, and worst-case "
      "bounds",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<ExplainOptions>();
        app.add_option("file", opts->file, "Pipeline file (YAML)")->required();
        app.add_option("--job", opts->jobs, "Only this job (repeatable)");
        AddRunnerOption(app, opts->runner);
        app.footer(
            "For each step: timeout, attempts, max_turns, max_context_bytes, "
            "llm_timeout,\n"
            "tool_timeout and budget, each with its origin (step, agent entry "
            "or default),\n"
            "the retry schedule, and the worst-case wall-clock bound of each "
            "step and job.");
        return [opts] { return RunExplain(*opts); };
      }};
}

}  // namespace steps::cli
