// Running a command under bubblewrap (bwrap, Debian's `bubblewrap`): the
// optional sandbox of task scripts and the run_shell tool. A wrapped command
// sees a read-only system, one writable directory, a private /tmp, no
// network unless asked, and nothing else of the machine's files.
#ifndef STEPS_PROCESS_SANDBOX_BWRAP_H_
#define STEPS_PROCESS_SANDBOX_BWRAP_H_

#include <string>
#include <vector>

#include "core/status.h"

namespace steps {

class ProcessLauncher;

struct SandboxOptions {
  // The one directory the command may write (absolute path): bound
  // read-write at its own path and where the command starts. Everything else
  // of the host's files is absent, except the read-only system below.
  // Required.
  std::string writable_dir;
  // Keep the host's network. Default: false: the command gets a network
  // namespace of its own with no interface up, so no connection (loopback
  // included) leaves it.
  bool network = false;
  // The bwrap binary, looked up in the child's PATH unless it holds a '/'.
  // Default: "bwrap".
  std::string bwrap = "bwrap";
};

// The argv that runs `argv` inside the sandbox:
//   bwrap  --ro-bind /usr /usr  (and /bin, /sbin, /lib* as on the host:
//          read-only binds, or the same symlinks)
//          --ro-bind /etc /etc  --proc /proc  --dev /dev  --tmpfs /tmp
//          --bind DIR DIR  --remount-ro /  --chdir DIR
//          --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try
//          [--unshare-net]  --die-with-parent --new-session --cap-drop ALL
//          -- argv...
// The root is an empty tmpfs made read-only, so a write anywhere but DIR and
// /tmp (private, gone when the command ends) fails with EROFS. The command
// is pid 1's child in its own pid namespace: when bwrap is killed (the
// launcher kills its process group), everything inside dies with it.
// Reads the host's root (lstat of /bin, /lib, ...) to mirror its layout.
// REQUIRES: !argv.empty(), options.writable_dir is absolute.
std::vector<std::string> WrapInSandbox(const std::vector<std::string>& argv,
                                       const SandboxOptions& options);

// Whether bwrap can run here: runs `bwrap --ro-bind / / --unshare-pid
// --unshare-net true` through `launcher` (no deadline: it either starts
// at once or fails). Ok; kNotFound when the binary cannot be started, with
// the fix (install Debian's bubblewrap); kUnavailable when bwrap cannot
// create its namespaces, with bwrap's own words and the fix (allow user
// namespaces, or run as root).
Status CheckBwrap(ProcessLauncher& launcher,
                  const std::string& bwrap = "bwrap");

}  // namespace steps

#endif  // STEPS_PROCESS_SANDBOX_BWRAP_H_
