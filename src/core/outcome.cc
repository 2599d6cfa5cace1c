#include "core/outcome.h"

namespace steps {

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kSucceeded:
      return "succeeded";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kErrored:
      return "errored";
    case Outcome::kAborted:
      return "aborted";
    case Outcome::kNotStarted:
      return "not started";
  }
  return "unknown";
}

std::optional<Outcome> ParseOutcome(std::string_view name) {
  for (Outcome o : {Outcome::kSucceeded, Outcome::kFailed, Outcome::kErrored,
                    Outcome::kAborted}) {
    if (OutcomeName(o) == name) return o;
  }
  return std::nullopt;
}

}  // namespace steps
