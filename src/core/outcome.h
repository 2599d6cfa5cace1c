// How every step, hook and job ends (DESIGN.md, "Outcomes"), and the record
// of a step that never started.
#ifndef STEPS_CORE_OUTCOME_H_
#define STEPS_CORE_OUTCOME_H_

#include <optional>
#include <string_view>

namespace steps {

enum class Outcome {
  kSucceeded,
  kFailed,   // The work said no: exit code, assert miss, expired timeout, caps.
  kErrored,  // The machinery broke: spawn, workspace, transport.
  kAborted,  // SIGINT/SIGTERM.
  // Never started: kept from starting by the job's deadline, a fail_fast
  // sibling, an abort or a spent across budget. Only a step's record ends
  // so (its error says why); it fires no hook and is not in `execution`.
  kNotStarted,
};

// "succeeded", "failed", "errored", "aborted", "not started".
std::string_view OutcomeName(Outcome o);
// One of the four ways work ends; "not started" is not parsed (nothing can
// assert it of a job).
std::optional<Outcome> ParseOutcome(std::string_view name);

}  // namespace steps

#endif  // STEPS_CORE_OUTCOME_H_
