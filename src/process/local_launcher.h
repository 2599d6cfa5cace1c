// LocalProcessLauncher: runs requests as child processes of this one.
#ifndef STEPS_PROCESS_LOCAL_LAUNCHER_H_
#define STEPS_PROCESS_LOCAL_LAUNCHER_H_

#include <chrono>
#include <cstdint>
#include <optional>
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
//
// In a process that called BecomeChildSubreaper (process/subreaper.h), a
// run also ends everything its processes started outside their group
// (`setsid cmd &`, double forks) before Run returns: nothing a run starts
// outlives it.

// One run's process group, named so that a recycled pid is never mistaken
// for it: the group id (the leader's pid) and the leader's start time
// (/proc/PID/stat field 22, clock ticks after boot).
struct ProcessGroupId {
  int pgid = 0;
  uint64_t leader_start_time = 0;
};

// Told when a run's process group starts and when it is gone, e.g. to
// record it so that a later process can end the group if this one dies
// first. Called on the thread that called Run; must not throw, and should
// be quick.
class ProcessGroupObserver {
 public:
  virtual ~ProcessGroupObserver() = default;
  // The leader was just started (it may already have exited). Its
  // deadline is enforced once this returns: `wait_until` is when it is
  // (on the steady clock), for an observer that may wait (the store, held
  // by another process) to wait no longer; nullopt when none applies.
  virtual void OnGroupStart(
      const ProcessGroupId& group,
      std::optional<std::chrono::steady_clock::time_point> wait_until) = 0;
  // The group was killed and its leader reaped.
  virtual void OnGroupEnd(const ProcessGroupId& group) = 0;
};

struct LocalLauncherOptions {
  // Watch each child through a pidfd (Linux 5.3+). When false, or when the
  // kernel has none, the child's state is checked every 20ms instead.
  // Default: true.
  bool use_pidfd = true;
  // Told about every run's process group. Must outlive the launcher.
  // Default: nullptr (nobody).
  ProcessGroupObserver* groups = nullptr;
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
  // This process's environment as the base, with options.
  LocalProcessLauncher(Clock& clock, LocalLauncherOptions options);
  // The base environment is given ("NAME=value" entries).
  LocalProcessLauncher(Clock& clock, std::vector<std::string> base_env,
                       LocalLauncherOptions options = {});

  ProcessResult Run(const ProcessRequest& request) override;
  // The child joins a scope of its own (in a subreaper process) and the
  // options' group observer hears of its group, as a run's would.
  Result<std::unique_ptr<LiveProcess>> Start(
      const ProcessRequest& request) override;

 private:
  // Run's work once its descriptor slot is held, on the calling thread;
  // `start` is when Run began.
  ProcessResult RunHere(const ProcessRequest& request, SteadyTime start);

  Clock& clock_;
  const std::vector<std::string> base_env_;
  const LocalLauncherOptions options_;
};

}  // namespace steps

#endif  // STEPS_PROCESS_LOCAL_LAUNCHER_H_
