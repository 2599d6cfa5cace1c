// LocalProcessLauncher: runs requests as child processes of this one.
#ifndef STEPS_PROCESS_LOCAL_LAUNCHER_H_
#define STEPS_PROCESS_LOCAL_LAUNCHER_H_

#include <string>
#include <vector>

#include "process/process.h"

namespace steps {

class Clock;

// Each run is a child of this process and the leader of its own process
// group. The calling thread waits in ppoll on the output pipes, a pidfd for
// the child (Linux 5.3+; older kernels fall back to checking every 20ms) and
// an eventfd the request's CancelToken writes to, with the nearest of
// deadline, kill grace and drain time as timeout: no extra threads, no busy
// loop, no SIGCHLD handler.
//
// The run's end:
//  - The main child exits: the rest of its group gets SIGKILL at once (while
//    the leader is still an unreaped zombie, so the group id cannot have been
//    reused), then the pipes are drained until EOF or drain_timeout.
//  - Deadline or cancellation first: SIGTERM to the group, SIGKILL after
//    kill_grace, then as above.
//
// Thread-safe: any number of Runs may go at once. REQUIRES: nothing else in
// this process reaps children with waitpid(-1) or ignores SIGCHLD
// (SA_NOCLDWAIT), which would take the exit status away from Run.
struct LocalLauncherOptions {
  // Watch each child through a pidfd (Linux 5.3+). When false, or when the
  // kernel has none, the child's state is checked every 20ms instead.
  // Default: true.
  bool use_pidfd = true;
};

// This process's environment as "NAME=value" entries, without the
// variables named in `withheld`: a base environment for the launcher that
// keeps, say, provider keys away from every child unless a request sets them.
std::vector<std::string> CurrentEnvironmentWithout(
    const std::vector<std::string>& withheld);

class LocalProcessLauncher : public ProcessLauncher {
 public:
  // Children inherit (by default) this process's environment as it is now;
  // later setenv calls are not seen. `clock` reads the time the deadline is
  // measured on; it must outlive the launcher. Default: RealClock(). (The
  // waits themselves are real: with a FakeClock, a deadline passes only
  // when the fake time has been advanced and the run next wakes.)
  explicit LocalProcessLauncher(Clock& clock);
  LocalProcessLauncher();
  // The base environment is given ("NAME=value" entries).
  LocalProcessLauncher(Clock& clock, std::vector<std::string> base_env,
                       LocalLauncherOptions options = {});

  ProcessResult Run(const ProcessRequest& request) override;

 private:
  Clock& clock_;
  const std::vector<std::string> base_env_;
  const LocalLauncherOptions options_;
};

}  // namespace steps

#endif  // STEPS_PROCESS_LOCAL_LAUNCHER_H_
