// Judging a finished job by its `assert:` block (what `steps test` does).
#ifndef STEPS_PIPELINE_JOB_ASSERT_H_
#define STEPS_PIPELINE_JOB_ASSERT_H_

#include <optional>
#include <string>

#include "pipeline/model.h"
#include "pipeline/run_record.h"

namespace steps::pipeline {

// nullopt when the job passes: its assert holds (execution, in order, and
// outcome), or it has none and succeeded. Otherwise why not, for people.
std::optional<std::string> JudgeJob(const Job& job, const JobRecord& record);

// "[a, b, c]"
std::string FormatList(const std::vector<std::string>& names);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_JOB_ASSERT_H_
