// Keeping every process a run starts inside that run, even one that leaves
// its process group (`setsid cmd &`, `setsid -f`, a double fork). A run
// here is one ProcessLauncher::Run: a task attempt, a resource script, a
// run_shell call, a CLI agent.
//
// A process that leaves the group is out of reach of kill(-pgid). So this
// process becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER): whatever
// a run leaves behind is re-parented to us instead of to init when its
// parent dies, and stays where we can find it. Each run's children carry
// one environment variable, STEPS_PROCESS_SCOPE, with a value unique to the
// run; its descendants inherit it, setsid and double forks included.
//
// The rule, applied when a run ends (SweepScope), after its group was
// killed and its leader reaped: every process re-parented to us is killed
// (SIGKILL) together with all its descendants, unless its environment names
// the scope of a run still going (that run's end sees to it). So what the
// ending run left goes; so does a re-parented process with no scope at all
// (it cleared its environment, or it cannot be read: it came from some run
// of ours, and is not left to outlive the run that is ending, whichever
// that was), and one whose run is already over (it was re-parented late,
// or came from a nested steps that died). Every re-parented process that
// has exited is reaped (waitpid on its pid), so no zombie is left.
// The sweep waits (bounded) until the run's process group is empty, since a
// group member's escaped children are re-parented only when it dies.
//
// Our own children started by the launcher are registered (SpawnGuard)
// and never touched by a sweep: their exit status belongs to Run.
// REQUIRES: in a subreaper process, children are started only through the
// LocalProcessLauncher; a child started another way (from the main thread
// or from a thread that sweeps) would be taken for an orphan (killed,
// reaped).
#ifndef STEPS_PROCESS_SUBREAPER_H_
#define STEPS_PROCESS_SUBREAPER_H_

#include <sys/types.h>

#include <string>

#include "core/duration.h"
#include "core/status.h"
#include "process/guardian_protocol.h"

namespace steps {

// Makes this process a child subreaper and turns on sweeping for every
// LocalProcessLauncher in it. Call once, early, from a process that starts
// children only through the launcher (the `steps` binary). Errors when the
// kernel refuses (then nothing changes: runs still kill their groups).
Status BecomeChildSubreaper();

// True once BecomeChildSubreaper succeeded.
bool IsChildSubreaper();

// A new scope value ("PID.N", unique across processes), marked as going
// until SweepScope ends it.
std::string BeginProcessScope();

// The launcher's own children, which a sweep never kills or reaps.
// A SpawnGuard holds sweeps off while a child is started, so a sweep never
// sees a child of ours before it is registered. Thread-safe.
class SpawnGuard {
 public:
  SpawnGuard();
  ~SpawnGuard();
  SpawnGuard(const SpawnGuard&) = delete;
  SpawnGuard& operator=(const SpawnGuard&) = delete;
  // Registers the child just started. A pid may be registered more than
  // once (recycled before an unregistration): each needs one Unregister.
  void Register(pid_t pid);
};
// Call once the registered child was reaped.
void UnregisterChild(pid_t pid);

// Ends `scope` (from BeginProcessScope), then kills what the run with that
// scope and process group `pgid` left behind and reaps every re-parented
// process that has exited, as the rule above says. Waits at most `max_wait`
// for dying processes. Kills nothing unless IsChildSubreaper().
// Thread-safe.
void SweepScope(const std::string& scope, pid_t pgid, Millis max_wait);

}  // namespace steps

#endif  // STEPS_PROCESS_SUBREAPER_H_
