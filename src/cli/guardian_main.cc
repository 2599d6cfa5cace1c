// `steps-guardian __guard STATE_DIR RUN_ID PID locked|unlocked`: the run
// guardian as a program of its own (process/guardian.h). It links only what
// the guardian needs (the store, the process sweeps, the log), so that the
// start it costs each run is a fraction of `steps`'s own.
#include <fcntl.h>

#include <cstring>

#include "cli/commands.h"
#include "process/guardian.h"

int main(int argc, char** argv) {
  // As `steps` does: descriptors 0-2 open, so nothing lands there.
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 70;
  }
  if (argc < 2 || std::strcmp(argv[1], steps::kGuardianCommand) != 0)
    return steps::cli::kExitUsage;
  return steps::cli::RunGuardianCommand(argc, argv);
}
