// The waits between attempts of the `retry:` block (spec text 000).
#ifndef STEPS_PIPELINE_RETRY_SCHEDULE_H_
#define STEPS_PIPELINE_RETRY_SCHEDULE_H_

#include <vector>

#include "core/duration.h"
#include "pipeline/model.h"

namespace steps::pipeline {

// The wait before attempt `attempt` (2 for the first retry). fixed waits the
// base each time, linear adds the base each time, exponential doubles; each
// wait is capped by max_delay. REQUIRES: attempt >= 2.
Millis RetryWait(const RetrySpec& retry, int attempt);

// Waits before attempts 2..attempts (empty for one attempt).
std::vector<Millis> RetryWaits(const RetrySpec& retry, int attempts);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_RETRY_SCHEDULE_H_
