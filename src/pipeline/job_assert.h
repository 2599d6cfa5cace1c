// Judging a finished job by its `assert:` block (what `steps test` does).
#ifndef STEPS_PIPELINE_JOB_ASSERT_H_
#define STEPS_PIPELINE_JOB_ASSERT_H_

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "pipeline/diagnostics.h"
#include "pipeline/model.h"
#include "pipeline/run_record.h"

namespace steps::pipeline {

// Reads a job assert's `steps:` list (see StepCheck); reports bad entries
// into `d` with their lines. An undefined node reads as no checks.
std::vector<StepCheck> ReadStepChecks(const YAML::Node& n, Diagnostics& d);

// nullopt when the job passes: its assert holds (execution, in order,
// outcome, and each `steps:` entry), or it has none and succeeded.
// Otherwise why not, for people.
std::optional<std::string> JudgeJob(const Job& job, const JobRecord& record);

// The recorded waits between a step's attempts: from the end of one attempt
// to the start of the next, in milliseconds.
std::vector<int64_t> RecordedWaits(const StepRecord& step);

// "[a, b, c]"
std::string FormatList(const std::vector<std::string>& names);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_JOB_ASSERT_H_
