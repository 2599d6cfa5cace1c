// A run's guardian: a small process, started with the run, that ends what
// the run started if `steps` itself dies without doing so (SIGKILL, the OOM
// killer, a crash).
//
// `steps run` starts `steps-guardian __guard …`, a small program installed
// beside `steps` (GuardianProgram) that links the C library alone (about
// 1 ms of CPU at each run's start, against 3-5 ms for a program linking
// the store); where it is missing or cannot be started, the same binary
// (/proc/self/exe) with the same arguments. The small program only waits:
// when the run died, it becomes the run's own `steps` (descriptor 4, which
// the run opens on its program) running `steps __guard`, which does the
// rest. The guardian runs in a session
// of its own, so a terminal's Ctrl-C or hang-up never reaches it. Its
// standard input is one end of a socket pair whose other end only the run
// holds (close-on-exec: no task inherits it). When the run ends as it
// should, it says so and the guardian exits at once. When the guardian
// reads end-of-file without that word, the run died: it kills what the run
// recorded and every process carrying the run's STEPS_PROCESS_SCOPE
// (process/subreaper.h), then exits. The run also hands it a duplicate of
// its run lock (descriptor 3), so the lock is held until that is done: a
// run whose lock is free has nothing left running.
#ifndef STEPS_PROCESS_GUARDIAN_H_
#define STEPS_PROCESS_GUARDIAN_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "process/guardian_protocol.h"
#include "process/local_launcher.h"
#include "process/unique_fd.h"

namespace steps {

// The guardian's own program, beside `steps` or in ../libexec/steps/.
inline constexpr char kGuardianProgram[] = "steps-guardian";

// The program to start as the guardian of a run of the `steps` at `self`
// (an absolute path): `kGuardianProgram` in the same folder (a build tree),
// else in `../libexec/steps/` (an installed `steps`: /usr/bin and
// /usr/libexec/steps), the first for which `executable` holds; else
// "/proc/self/exe", which runs `steps __guard` itself.
std::string GuardianProgram(
    const std::string& self,
    const std::function<bool(const std::string&)>& executable);

class RunGuardian {
 public:
  // Starts GuardianProgram() with argv [steps, __guard, args…]: standard input
  // the guardian's end of the socket pair, standard output /dev/null,
  // standard error ours, `pass_fd` (unless -1) as its descriptor 3, our own
  // program as its descriptor 4 (for steps-guardian), and no
  // STEPS_PROCESS_SCOPE in its environment. The child is registered with
  // the sweeps (process/subreaper.h), which never touch it.
  static Result<std::unique_ptr<RunGuardian>> Start(
      const std::vector<std::string>& args, int pass_fd);

  // Tells the guardian the run ended as it should, and reaps it; one that
  // has not exited 2 s later (stopped, say) is killed.
  ~RunGuardian();

  // True when the guardian has exited (been killed) although the run has
  // not said it ended: nothing would end the run's processes if it died.
  bool Lost();

  RunGuardian(const RunGuardian&) = delete;
  RunGuardian& operator=(const RunGuardian&) = delete;

  pid_t pid() const { return pid_; }

 private:
  RunGuardian(pid_t pid, UniqueFd socket)
      : pid_(pid), socket_(std::move(socket)) {}

  pid_t pid_;
  UniqueFd socket_;
  bool exited_ = false;
};

// What EndLeftovers did.
struct LeftoverEnd {
  int groups_killed = 0;   // Recorded groups that were still ours.
  int escaped_killed = 0;  // Processes of the run outside those groups.
};

// Kills (SIGKILL) each of `groups` whose leader is still the recorded
// process (process/recorded_group.h), then every process whose
// STEPS_PROCESS_SCOPE names a run of process `starter` ("PID.N") or that is
// in one of the killed groups, and looks again until none is left running
// (zombies aside) or `max_wait` has passed. `ended[i]` tells whether
// groups[i] was killed.
LeftoverEnd EndLeftovers(pid_t starter,
                         const std::vector<ProcessGroupId>& groups,
                         Millis max_wait, std::vector<bool>* ended);

}  // namespace steps

#endif  // STEPS_PROCESS_GUARDIAN_H_
