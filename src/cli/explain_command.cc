// `steps explain FILE [--job NAME]...`
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "pipeline/explain.h"
#include "pipeline/loader.h"

namespace steps::cli {
namespace {

struct ExplainOptions {
  std::string file;
  std::vector<std::string> jobs;
};

int RunExplain(const ExplainOptions& opts) {
  pipeline::LoadResult r = pipeline::LoadPipelineFile(opts.file);
  std::cerr << r.diagnostics.FormatAll();
  if (!r.pipeline) return kExitRefused;
  for (const std::string& job : opts.jobs) {
    if (!r.pipeline->FindJob(job)) {
      std::cerr << "steps explain: no job named '" << job << "' in "
                << opts.file << "\n";
      return kExitUsage;
    }
  }
  pipeline::ResolvedPlan plan(r.pipeline);
  std::cout << pipeline::Explain(plan, opts.jobs);
  return kExitOk;
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
