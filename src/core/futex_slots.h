// The kernel's table of futex waiters for this process. Linux 6.16 and
// later give each process a table of its own, sized by the number of CPUs
// (16 slots on a 2-core machine), not by its threads: with thousands of
// threads asleep (an across of agent cells, each waiting for its model's
// answer), every wake walks a chain of hundreds of sleepers, and the run
// spends a fifth of its CPU there. A fan-out that starts many threads asks
// for a table to match.
#ifndef STEPS_CORE_FUTEX_SLOTS_H_
#define STEPS_CORE_FUTEX_SLOTS_H_

#include <cstddef>

namespace steps {

// Makes room in this process's futex table for about `threads` sleeping
// threads: at least twice as many slots, a power of two, at most
// kMaxFutexSlots. Only ever grows the table; does nothing below
// kFutexSlotsFrom threads, and where the kernel has no table of the
// process's own (before 6.16: one table for the whole machine). Returns the
// slots the table has after the call, 0 when unknown.
size_t ProvideFutexSlots(size_t threads);

inline constexpr size_t kFutexSlotsFrom = 256;
inline constexpr size_t kMaxFutexSlots = size_t{1} << 17;

}  // namespace steps

#endif  // STEPS_CORE_FUTEX_SLOTS_H_
