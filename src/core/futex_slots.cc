#include "core/futex_slots.h"

#include <sys/prctl.h>

#include <algorithm>
#include <bit>
#include <mutex>

// From linux/prctl.h of 6.16, for headers older than the kernel.
#ifndef PR_FUTEX_HASH
#define PR_FUTEX_HASH 78
#define PR_FUTEX_HASH_SET_SLOTS 1
#define PR_FUTEX_HASH_GET_SLOTS 2
#endif

namespace steps {

size_t ProvideFutexSlots(size_t threads) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const int now = prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0);
  // 0: the machine's table (asked for, or no table allocated yet); < 0: a
  // kernel without per-process tables.
  if (now < 0) return 0;
  if (threads < kFutexSlotsFrom) return static_cast<size_t>(now);
  const size_t want = std::min(kMaxFutexSlots, std::bit_ceil(threads * 2));
  if (static_cast<size_t>(now) >= want) return static_cast<size_t>(now);
  if (prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, want, 0, 0) != 0)
    return static_cast<size_t>(now);
  return want;
}

}  // namespace steps
