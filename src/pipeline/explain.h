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

// The bound of one step, its hooks included, with the default max_visits
// for `to:` routing inside it.
Bound StepBound(const ResolvedPlan& plan, const Step& step);
// The same as a step of `job`: its max_visits, and no more than the job's
// timeout plus the longest work step, branch or cell that can start before
// it. Every sum and product saturates; bounds of 100 years or more print as
// "over 100 years".
Bound StepBound(const ResolvedPlan& plan, const Job& job, const Step& step);
// The bound of one job: its plan (steps between a `to:` target and its
// source counted max_visits times) and hooks, and its own timeout, which is
// checked between steps and before each branch or cell of a fan-out, and
// so may be overrun by the longest of those.
Bound JobBound(const ResolvedPlan& plan, const Job& job);

// The text `steps explain` prints. `jobs` empty means all jobs.
std::string Explain(const ResolvedPlan& plan,
                    const std::vector<std::string>& jobs);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_EXPLAIN_H_
