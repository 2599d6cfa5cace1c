#include "cli/runner_option.h"

namespace steps::cli {

void AddRunnerOption(CLI::App& app, std::string& runner) {
  app.add_option("--runner", runner,
                 "Run every task, get and put step here: local (this "
                 "machine) or slurm (as Slurm jobs, docs/slurm.md), over "
                 "what the file says")
      ->envname("STEPS_RUNNER")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->type_name("local|slurm");
}

pipeline::PlanOptions PlanOptionsFor(const std::string& runner) {
  pipeline::PlanOptions options;
  if (runner == "local") options.runner = pipeline::RunnerKind::kLocal;
  if (runner == "slurm") options.runner = pipeline::RunnerKind::kSlurm;
  return options;
}

}  // namespace steps::cli
