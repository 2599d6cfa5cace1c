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
// standard input again and finds the same end-of-file. When that program
// cannot be started any more, this one ends what it can find (EndScope).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/exit_codes.h"
#include "process/guardian_protocol.h"

extern char** environ;

namespace {

// What the run's own `steps` does first (process/guardian.h, EndLeftovers),
// without the store, for when that program cannot be started any more
// (made non-executable since, its libraries gone with an upgrade): kills
// every process whose environment names the dead run's scope, and looks
// again until none is left (five quiet looks, at most 5 s). The groups the
// run recorded are in the store, out of reach here; their processes carry
// the scope too unless they cleared their environment. Returns how many
// processes were killed.
int EndScope(const char* starter) {
  char scope[64];
  snprintf(scope, sizeof scope, "%s=%s.", steps::kProcessScopeVar, starter);
  const size_t scope_len = strlen(scope);
  static char environ_bytes[1 << 18];
  int killed = 0;
  int quiet = 0;
  for (int look = 0; look < 1000 && quiet < 5; ++look) {
    bool found = false;
    if (DIR* proc = opendir("/proc")) {
      while (dirent* e = readdir(proc)) {
        char* end = nullptr;
        const long pid = strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != '\0' || pid == getpid()) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, environ_bytes, sizeof environ_bytes - 1);
        close(fd);
        for (ssize_t at = 0; at < n;) {
          const char* entry = environ_bytes + at;
          const size_t len = strnlen(entry, static_cast<size_t>(n - at));
          if (len >= scope_len && memcmp(entry, scope, scope_len) == 0) {
            if (kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++killed;
            found = true;
            break;
          }
          at += static_cast<ssize_t>(len) + 1;
        }
      }
      closedir(proc);
    }
    quiet = found ? 0 : quiet + 1;
    usleep(5000);
  }
  return killed;
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
  if (steps::RunEndedCleanly(STDIN_FILENO)) return steps::cli::kExitOk;
  // The run died. Its `steps` does the rest, the lock (descriptor 3) held
  // throughout: it goes with the process, not with the program.
  const int steps_fd = steps::kGuardianStepsFd;
  if (fcntl(steps_fd, F_SETFD, FD_CLOEXEC) == 0) {
    argv[0] = const_cast<char*>("steps");
    execveat(steps_fd, "", argv, environ, AT_EMPTY_PATH);
  }
  const int why = errno;
  const int killed = EndScope(argv[4]);
  fprintf(stderr,
          "steps-guardian: the run %s died and its steps program could not "
          "be started (%s): killed %d of its processes found by %s; its "
          "recorded process groups were not checked, and the store does not "
          "say so\n",
          argv[3], strerror(why), killed, steps::kProcessScopeVar);
  return 70;
}
