// Before a run: can every agent source the jobs would use be served here?
// A hosted source needs its key variable (the provider's default, or
// `api_key_env`), a `mock/` source a mock: block, a CLI source the
// variables its `env:` references. Found before the first step runs, so a
// missing key never surfaces after earlier steps did their work.
#ifndef STEPS_PIPELINE_SOURCE_CHECK_H_
#define STEPS_PIPELINE_SOURCE_CHECK_H_

#include <string>
#include <vector>

#include "pipeline/environment.h"
#include "pipeline/resolve.h"

namespace steps::pipeline {

struct SourceProblem {
  int line = 0;         // The source's line in the pipeline file.
  std::string message;  // Names the source and the variable, and the fix.
};

// The sources of the agent steps, fixers and assert judges of `jobs` (all
// jobs when empty), each checked once against `lookup`, in file order. Only
// builds providers; sends nothing. Not for a mocked run, where the mock:
// block serves every source.
std::vector<SourceProblem> CheckSourceEnvironment(
    const ResolvedPlan& plan, const std::vector<std::string>& jobs,
    const EnvLookup& lookup);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_SOURCE_CHECK_H_
