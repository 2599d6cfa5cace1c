#include "process/limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

namespace steps {

Result<uint64_t> RaiseOpenFileLimit() {
  constexpr rlim_t kCeiling = 1 << 20;
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return ErrnoStatus("getrlimit(RLIMIT_NOFILE)", errno);
  }
  rlim_t want = limit.rlim_max == RLIM_INFINITY
                    ? kCeiling
                    : std::min<rlim_t>(limit.rlim_max, kCeiling);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < want) {
    limit.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return ErrnoStatus("setrlimit(RLIMIT_NOFILE)", errno);
    }
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace steps
