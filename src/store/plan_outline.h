// The outline of a run's plan as it starts: per job, the steps that may run
// in plan order, with the ids the executor gives them on their first run.
// The run store keeps it so that a reader (the web UI) shows the steps not
// started yet beside those that ran.
#ifndef STEPS_STORE_PLAN_OUTLINE_H_
#define STEPS_STORE_PLAN_OUTLINE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/resolve.h"

namespace steps::store {

struct PlannedStep {
  std::string id;  // "JOB:2", "JOB:3.1", "JOB:2/on_failure", "JOB:job/ensure".
  std::string name;  // As in `execution:` lists.
  std::string kind;  // "task", "get", "put", "agent".
  std::string hook;  // "on_failure", ...; empty for a step that is not one.
  int line = 0;
  // The resolved timeout (an agent's conversation deadline, a task's per
  // attempt); nullopt when nothing limits it.
  std::optional<int64_t> timeout_ms;
};

struct PlannedJob {
  std::string name;
  std::vector<PlannedStep> steps;
  // Set when the job has more than kMaxPlannedSteps steps (a wide
  // `across:`): the rest are left out.
  bool truncated = false;
};

// Steps kept per job in an outline.
inline constexpr size_t kMaxPlannedSteps = 1000;

// The outline of the jobs `jobs` names (all when empty), in file order.
// Every hook is listed (a run takes at most one of on_success, on_failure,
// on_error, on_abort per step); fixers are not (they run only on failure),
// and a `to:` route's later visits ("JOB:2#2") are not either.
std::vector<PlannedJob> OutlinePlan(const pipeline::ResolvedPlan& plan,
                                    const std::vector<std::string>& jobs);

// As stored: [{"name", "truncated", "steps": [{"id", "name", "kind",
// "hook", "line", "timeout_ms"}]}]; and back (skipping what does not fit,
// so a damaged text reads as an empty outline).
nlohmann::json OutlineJson(const std::vector<PlannedJob>& outline);
std::vector<PlannedJob> OutlineFromJson(const nlohmann::json& j);

}  // namespace steps::store

#endif  // STEPS_STORE_PLAN_OUTLINE_H_
