// `steps explain`: every resolved dial with where it came from, the retry
// schedule, and the worst-case wall-clock bound of each step and job.
#ifndef STEPS_PIPELINE_EXPLAIN_H_
#define STEPS_PIPELINE_EXPLAIN_H_

#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "pipeline/resolve.h"

namespace steps::pipeline {

// A worst-case wall-clock bound, or "unbounded" with the reason.
struct Bound {
  std::optional<Millis> value;  // nullopt: unbounded.
  std::string why;              // How the value was reached, or why none.

  bool bounded() const { return value.has_value(); }
};

// The bound of one step, its hooks included.
Bound StepBound(const ResolvedPlan& plan, const Step& step);
// The bound of one job: its plan and hooks, and its own timeout, which is
// checked between steps and so may be overrun by one step's bound.
Bound JobBound(const ResolvedPlan& plan, const Job& job);

// The text `steps explain` prints. `jobs` empty means all jobs.
std::string Explain(const ResolvedPlan& plan,
                    const std::vector<std::string>& jobs);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_EXPLAIN_H_
