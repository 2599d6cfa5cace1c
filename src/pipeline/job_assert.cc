#include "pipeline/job_assert.h"

namespace steps::pipeline {

std::string FormatList(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out + "]";
}

std::optional<std::string> JudgeJob(const Job& job, const JobRecord& record) {
  std::string why;
  if (!job.check) {
    if (record.outcome == Outcome::kSucceeded) return std::nullopt;
    return "the job " + std::string(OutcomeName(record.outcome)) +
           (record.error.empty() ? "" : ": " + record.error) +
           " (a job without 'assert:' passes only when it succeeds)";
  }
  const JobAssert& a = *job.check;
  if (a.outcome && *a.outcome != record.outcome) {
    why = "outcome " + std::string(OutcomeName(record.outcome)) +
          ", expected " + std::string(OutcomeName(*a.outcome));
    if (!record.error.empty()) why += " (" + record.error + ")";
  }
  if (a.execution && *a.execution != record.execution) {
    if (!why.empty()) why += "; ";
    why += "execution " + FormatList(record.execution) + ", expected " +
           FormatList(*a.execution);
  }
  if (why.empty()) return std::nullopt;
  return why;
}

}  // namespace steps::pipeline
