// `steps-guardian __guard STATE_DIR RUN_ID PID locked|unlocked`: the run
// guardian's own program (process/guardian.h). Every run starts it, and
// nearly every run ends as it should, so this program does only that part:
// it waits for the run's word and exits. It links nothing but the C
// library, and costs a run's start what the smallest program costs.
//
// When the run died instead (end-of-file without the word), it becomes the
// `steps` that started it (descriptor 4, opened by the run) running
// `steps __guard` with the same arguments, which ends what the run left
// running and records it (cli/guardian_command.cc). That reads its
// standard input again and finds the same end-of-file.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/exit_codes.h"
#include "process/guardian_protocol.h"

extern char** environ;

namespace {

// True when the run said it ended as it should; false at end-of-file (or
// an error reading) without that.
bool RunEndedCleanly() {
  char buffer[64];
  while (true) {
    ssize_t n = read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (memchr(buffer, steps::kGuardianCleanEnd, static_cast<size_t>(n)))
      return true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // As `steps` does: descriptors 0-2 open, so nothing lands there.
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 70;
  }
  if (argc != 6 || strcmp(argv[1], steps::kGuardianCommand) != 0)
    return steps::cli::kExitUsage;
  // In a session of its own already; a stray SIGINT or SIGHUP sent to it
  // by name still must not leave a dead run's processes running.
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  if (RunEndedCleanly()) return steps::cli::kExitOk;
  // The run died. Its `steps` does the rest, the lock (descriptor 3) held
  // throughout: it goes with the process, not with the program.
  const int steps_fd = steps::kGuardianStepsFd;
  if (fcntl(steps_fd, F_SETFD, FD_CLOEXEC) == 0) {
    argv[0] = const_cast<char*>("steps");
    execveat(steps_fd, "", argv, environ, AT_EMPTY_PATH);
  }
  fprintf(stderr,
          "steps-guardian: the run %s died, and what it left running could "
          "not be ended: starting its steps program: %s\n",
          argv[3], strerror(errno));
  return 70;
}
