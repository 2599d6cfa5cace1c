// Process-wide limits that running many children at once runs into.
#ifndef STEPS_PROCESS_LIMITS_H_
#define STEPS_PROCESS_LIMITS_H_

#include <cstdint>

#include "core/status.h"

namespace steps {

// Each concurrent run holds about six descriptors (pipes, pidfd, eventfd),
// so a wide fan-out can pass the common soft limit of 1024. Raises the soft
// RLIMIT_NOFILE to the hard limit (at most 1M) and returns the soft limit
// now in effect. Call once at startup, before threads start; children
// inherit the raised limit.
Result<uint64_t> RaiseOpenFileLimit();

}  // namespace steps

#endif  // STEPS_PROCESS_LIMITS_H_
