// How every step, hook and job ends (DESIGN.md, "Outcomes").
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
};

// "succeeded", "failed", "errored", "aborted".
std::string_view OutcomeName(Outcome o);
std::optional<Outcome> ParseOutcome(std::string_view name);

}  // namespace steps

#endif  // STEPS_CORE_OUTCOME_H_
