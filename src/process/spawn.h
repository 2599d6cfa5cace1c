// Starting one child for LocalProcessLauncher: environment, PATH lookup,
// pipes and posix_spawn with its own process group; and SpawnSetup, the
// posix_spawn set-up every child of ours shares (the run's guardian too).
#ifndef STEPS_PROCESS_SPAWN_H_
#define STEPS_PROCESS_SPAWN_H_

#include <signal.h>
#include <spawn.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "process/process.h"
#include "process/unique_fd.h"

namespace steps {

// A started child. The parent's ends of the pipes are non-blocking and
// close-on-exec; `in` is invalid when the request has no stdin text, `err`
// when stderr is merged into `out`.
struct SpawnedChild {
  pid_t pid = 0;
  UniqueFd out;
  UniqueFd err;
  UniqueFd in;
};

// Where a child started by SpawnSetup stands.
enum class SpawnGroup {
  kOwnGroup,    // Leader of a new process group, in our session.
  kOwnSession,  // Leader of a new session (so of a new group too).
};

// Owns posix_spawn's attribute and file-action objects for one child. The
// attributes give the child default dispositions for every signal and an
// empty mask, whatever this process ignores or blocks, and put it in its
// own group or session; the caller adds its file actions. Not thread-safe;
// one per spawn.
class SpawnSetup {
 public:
  explicit SpawnSetup(SpawnGroup group);
  ~SpawnSetup();
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  posix_spawn_file_actions_t* actions() { return &actions_; }

  // Starts `program` with `argv` and `env` ("NAME=value" entries) and
  // registers the child with the sweeps (SpawnGuard) before any sweep can
  // see it; the caller unregisters it once reaped. An error names `what`
  // and posix_spawn's reason.
  Result<pid_t> Spawn(const std::string& program, std::vector<std::string> argv,
                      std::vector<std::string> env, const std::string& what);

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

// The child's environment as "NAME=value" entries: `base` (ignored when the
// request does not inherit; narrowed to request.inherit_only when set) with
// the request's overrides and removals.
std::vector<std::string> BuildChildEnvironment(
    const ProcessRequest& request, const std::vector<std::string>& base);

// Finds `name` the way execvp would, in the colon-separated `path` list; a
// name containing '/' is returned as is. NotFound when no entry has an
// executable regular file of that name.
Result<std::string> FindExecutable(const std::string& name,
                                   const std::string& path);

// Where this process's binary lies ("/proc/self/exe" read); empty when
// /proc cannot say.
std::string SelfPath();
// Whether `path` is a regular file this process may execute.
bool IsExecutableFile(const std::string& path);
// Where `name`, a program installed with `steps`, lies for the `steps` at
// `self` (an absolute path): in the same folder (a build tree), else in
// `../libexec/steps/` (an install: /usr/bin and /usr/libexec/steps), the
// first for which `executable` holds; "" when neither.
std::string CompanionProgram(const std::string& self, const std::string& name,
                             const std::function<bool(const std::string&)>&
                                 executable = IsExecutableFile);

// Starts the request's command as the leader of a new process group, with
// default signal dispositions and an empty signal mask. A non-empty `scope`
// is set as STEPS_PROCESS_SCOPE in the child's environment, over anything
// the request says (process/subreaper.h). The child is registered with the
// sweeps (SpawnGuard) before any sweep can see it; the caller unregisters
// it once reaped. Errors (missing working directory, command not found,
// spawn failure) say what failed. Thread-safe.
Result<SpawnedChild> SpawnChild(const ProcessRequest& request,
                                const std::vector<std::string>& base_env,
                                const std::string& scope = "");

// How a child ended, once it has. Probe() asks without reaping it
// (waitid WNOWAIT), so its process group id stays taken until the caller
// reaps it.
struct ChildExit {
  bool exited = false;
  // Set when the child is no child of ours any more (ECHILD: reaped
  // elsewhere); `info` then reads as killed by no signal.
  bool reaped = false;
  siginfo_t info{};

  // Whether `pid` has exited; once it has, later calls change nothing.
  bool Probe(pid_t pid);
};

}  // namespace steps

#endif  // STEPS_PROCESS_SPAWN_H_
