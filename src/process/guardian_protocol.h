// What `steps run`, its processes and its guardian program
// (cli/guardian_main.cc) agree on, in a header of its own: that program
// includes nothing else of ours, so that it starts as fast as the smallest
// C program does.
#ifndef STEPS_PROCESS_GUARDIAN_PROTOCOL_H_
#define STEPS_PROCESS_GUARDIAN_PROTOCOL_H_

#include <errno.h>
#include <string.h>
#include <unistd.h>

namespace steps {

// The variable that names a run's scope in its processes' environment
// (process/subreaper.h): `STEPS_PROCESS_SCOPE=PID.…`, PID the run's.
inline constexpr char kProcessScopeVar[] = "STEPS_PROCESS_SCOPE";

// The hidden command the guardian runs as: `steps __guard ARGS…`.
inline constexpr char kGuardianCommand[] = "__guard";
// The one byte the run sends when it ended as it should.
inline constexpr char kGuardianCleanEnd = 'd';
// The guardian's descriptors besides its standard ones: the run's lock,
// and the `steps` program that started it (opened by the run, so that the
// one that ran is the one that ends what it left, even if the file was
// replaced since).
inline constexpr int kGuardianLockFd = 3;
inline constexpr int kGuardianStepsFd = 4;

// In the guardian: blocks on `fd` until the run says it ended as it should
// (true) or is gone without saying so (false: end-of-file, or an error).
inline bool RunEndedCleanly(int fd) {
  char buffer[64];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (memchr(buffer, kGuardianCleanEnd, static_cast<size_t>(n))) return true;
  }
}

}  // namespace steps

#endif  // STEPS_PROCESS_GUARDIAN_PROTOCOL_H_
