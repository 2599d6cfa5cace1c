// `--runner local|slurm` (or STEPS_RUNNER): where every task, get and put
// step of `steps run`, `steps resume`, `steps test` and `steps explain`
// runs, over what the file says (docs/slurm.md).
#ifndef STEPS_CLI_RUNNER_OPTION_H_
#define STEPS_CLI_RUNNER_OPTION_H_

#include <CLI/CLI.hpp>
#include <string>

#include "pipeline/resolve.h"

namespace steps::cli {

// Adds the option to `app`, writing what was given to `runner`.
void AddRunnerOption(CLI::App& app, std::string& runner);

// The plan options for what the option holds ("" when not given).
pipeline::PlanOptions PlanOptionsFor(const std::string& runner);

}  // namespace steps::cli

#endif  // STEPS_CLI_RUNNER_OPTION_H_
