#include "process/sandbox_bwrap.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "process/process.h"

namespace steps {
namespace {

// Top-level system folders a command needs to find programs and libraries.
// On a merged-/usr system most are symlinks into /usr; they are recreated as
// the same symlinks, and real directories are bound read-only.
constexpr const char* kSystemDirs[] = {"/bin",   "/sbin",  "/lib",
                                       "/lib32", "/lib64", "/libx32"};

void AddSystemDir(const char* path, std::vector<std::string>& out) {
  struct stat st;
  if (lstat(path, &st) != 0) return;  // Not on this host: nothing to mirror.
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return;
    out.insert(out.end(), {"--symlink", std::string(target, n), path});
  } else if (S_ISDIR(st.st_mode)) {
    out.insert(out.end(), {"--ro-bind", path, path});
  }
}

}  // namespace

std::vector<std::string> WrapInSandbox(const std::vector<std::string>& argv,
                                       const SandboxOptions& options) {
  const std::string& dir = options.writable_dir;
  std::vector<std::string> out = {options.bwrap, "--ro-bind", "/usr", "/usr"};
  for (const char* path : kSystemDirs) AddSystemDir(path, out);
  out.insert(out.end(), {"--ro-bind", "/etc", "/etc", "--proc", "/proc",
                         "--dev", "/dev", "--tmpfs", "/tmp"});
  if (options.network) {
    // Where systemd-resolved keeps resolv.conf, which /etc links to.
    out.insert(out.end(), {"--ro-bind-try", "/run/systemd/resolve",
                           "/run/systemd/resolve"});
  }
  // After /tmp's tmpfs, so a directory under /tmp is bound over it.
  out.insert(out.end(), {"--bind", dir, dir});
  // Last of the mounts: the empty root itself becomes read-only.
  out.insert(out.end(), {"--remount-ro", "/", "--chdir", dir});
  out.insert(out.end(), {"--unshare-pid", "--unshare-ipc", "--unshare-uts",
                         "--unshare-cgroup-try"});
  if (!options.network) out.push_back("--unshare-net");
  // --new-session: no TIOCSTI into the caller's terminal. --cap-drop ALL:
  // run as root, bwrap would otherwise keep every capability inside.
  out.insert(out.end(),
             {"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--"});
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Status CheckBwrap(ProcessLauncher& launcher, const std::string& bwrap) {
  ProcessRequest request = ProcessRequest::Exec(
      {bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"});
  request.merge_stderr = true;
  request.max_captured_bytes = 4096;
  ProcessResult r = launcher.Run(request);
  if (r.succeeded()) return Status::Ok();
  if (r.end == ProcessEnd::kFailedToStart) {
    return NotFound(
        "sandbox: bwrap is requested but cannot be started (" + r.error +
        "): install bubblewrap (Debian: apt-get install bubblewrap), or "
        "remove 'sandbox: bwrap'");
  }
  std::string said = r.out.text;
  while (!said.empty() && (said.back() == '\n' || said.back() == ' '))
    said.pop_back();
  if (said.empty()) said = r.Describe();
  return Status(
      StatusCode::kUnavailable,
      "sandbox: bwrap cannot create its namespaces here (" + said +
          "): allow unprivileged user namespaces (sysctl "
          "kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > "
          "0; in a container, one that permits them), run steps as root, or "
          "remove 'sandbox: bwrap'");
}

}  // namespace steps
