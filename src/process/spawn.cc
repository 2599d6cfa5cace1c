#include "process/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <utility>

#include "process/subreaper.h"

namespace steps {
namespace {

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

// Both ends close-on-exec; the parent's end is also non-blocking.
Status MakePipe(UniqueFd& read_end, UniqueFd& write_end, bool parent_reads) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  read_end.Reset(fds[0]);
  write_end.Reset(fds[1]);
  int parent_fd = parent_reads ? fds[0] : fds[1];
  int flags = fcntl(parent_fd, F_GETFL);
  if (flags < 0 || fcntl(parent_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoStatus("fcntl", errno);
  }
  return Status::Ok();
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string ValueOf(const std::vector<std::string>& env,
                    const std::string& name) {
  std::string prefix = name + "=";
  for (const std::string& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) == 0) {
      return entry.substr(prefix.size());
    }
  }
  return "";
}

// Sets STEPS_PROCESS_SCOPE, replacing any value the environment has.
void SetScope(std::vector<std::string>& env, const std::string& scope) {
  const std::string prefix = std::string(kProcessScopeVar) + "=";
  std::erase_if(env, [&](const std::string& entry) {
    return entry.compare(0, prefix.size(), prefix) == 0;
  });
  env.push_back(prefix + scope);
}

}  // namespace

SpawnSetup::SpawnSetup(SpawnGroup group) {
  posix_spawnattr_init(&attr_);
  posix_spawn_file_actions_init(&actions_);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr_, &all);
  posix_spawnattr_setsigmask(&attr_, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (group == SpawnGroup::kOwnGroup) {
    posix_spawnattr_setpgroup(&attr_, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  } else {
    flags |= POSIX_SPAWN_SETSID;
  }
  posix_spawnattr_setflags(&attr_, flags);
}

SpawnSetup::~SpawnSetup() {
  posix_spawn_file_actions_destroy(&actions_);
  posix_spawnattr_destroy(&attr_);
}

Result<pid_t> SpawnSetup::Spawn(const std::string& program,
                                std::vector<std::string> argv,
                                std::vector<std::string> env,
                                const std::string& what) {
  std::vector<char*> c_argv = Pointers(argv);
  std::vector<char*> c_env = Pointers(env);
  pid_t pid = 0;
  SpawnGuard guard;
  int rc = posix_spawn(&pid, program.c_str(), &actions_, &attr_, c_argv.data(),
                       c_env.data());
  if (rc != 0) return ErrnoStatus(what, rc);
  guard.Register(pid);
  return pid;
}

std::vector<std::string> BuildChildEnvironment(
    const ProcessRequest& request, const std::vector<std::string>& base) {
  std::map<std::string, std::string> vars;
  if (request.inherit_env) {
    const auto& only = request.inherit_only;
    for (const std::string& entry : base) {
      size_t eq = entry.find('=');
      if (eq == std::string::npos) continue;
      std::string name = entry.substr(0, eq);
      if (only && std::find(only->begin(), only->end(), name) == only->end())
        continue;
      vars[std::move(name)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [name, value] : request.env) vars[name] = value;
  for (const std::string& name : request.env_unset) vars.erase(name);
  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

Result<std::string> FindExecutable(const std::string& name,
                                   const std::string& path) {
  if (name.empty()) return NotFound("empty command name");
  if (name.find('/') != std::string::npos) return name;
  std::string dirs = path.empty() ? kDefaultPath : path;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty()) continue;  // The caller's cwd is not a place to search.
    std::string candidate = dir + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return NotFound(name + ": command not found in PATH");
}

bool ChildExit::Probe(pid_t pid) {
  if (exited) return true;
  siginfo_t probe{};
  int rc;
  do {
    rc = waitid(P_PID, static_cast<id_t>(pid), &probe,
                WEXITED | WNOHANG | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0 && probe.si_pid == pid) {
    info = probe;
    exited = true;
  } else if (rc < 0) {
    exited = true;
    reaped = true;
    info.si_code = CLD_KILLED;
    info.si_status = 0;
  }
  return exited;
}

Result<SpawnedChild> SpawnChild(const ProcessRequest& request,
                                const std::vector<std::string>& base_env,
                                const std::string& scope) {
  std::vector<std::string> argv = request.argv;
  if (argv.empty()) argv = {"bash", "-c", request.command};
  for (const std::string& arg : argv) {
    if (arg.find('\0') != std::string::npos) {
      return InvalidArgument("command contains a NUL byte");
    }
  }
  if (request.working_dir.find('\0') != std::string::npos) {
    return InvalidArgument("working directory contains a NUL byte");
  }
  for (const auto& [name, value] : request.env) {
    if (name.empty() ||
        name.find_first_of(std::string("=\0", 2)) != std::string::npos) {
      return InvalidArgument("environment variable name '" + name +
                             "' is empty or holds '=' or a NUL byte");
    }
    if (value.find('\0') != std::string::npos) {
      return InvalidArgument("environment variable " + name +
                             " holds a NUL byte");
    }
  }

  if (!request.working_dir.empty()) {
    struct stat st;
    if (stat(request.working_dir.c_str(), &st) != 0) {
      return ErrnoStatus("working directory " + request.working_dir, errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      return ErrnoStatus("working directory " + request.working_dir, ENOTDIR);
    }
  }

  std::vector<std::string> env = BuildChildEnvironment(request, base_env);
  if (!scope.empty()) SetScope(env, scope);
  Result<std::string> program = FindExecutable(argv[0], ValueOf(env, "PATH"));
  if (!program.ok()) return program.status();

  SpawnedChild child;
  UniqueFd out_write, err_write, in_read;
  if (Status s = MakePipe(child.out, out_write, true); !s.ok()) return s;
  if (!request.merge_stderr) {
    if (Status s = MakePipe(child.err, err_write, true); !s.ok()) return s;
  }
  if (request.stdin_text) {
    if (Status s = MakePipe(in_read, child.in, false); !s.ok()) return s;
  }

  // Own process group, so the whole tree can be signalled at once.
  SpawnSetup setup(SpawnGroup::kOwnGroup);
  posix_spawn_file_actions_t* actions = setup.actions();
  if (in_read.valid()) {
    posix_spawn_file_actions_adddup2(actions, in_read.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(actions, STDIN_FILENO, "/dev/null",
                                     O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(
      actions, request.merge_stderr ? out_write.get() : err_write.get(),
      STDERR_FILENO);
  // A child gets its three standard descriptors and nothing else, even
  // what whoever started `steps` left open without close-on-exec.
  posix_spawn_file_actions_addclosefrom_np(actions, 3);
  if (!request.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(actions, request.working_dir.c_str());
  }

  const std::string what = "spawn " + argv[0];
  Result<pid_t> pid =
      setup.Spawn(*program, std::move(argv), std::move(env), what);
  if (!pid.ok()) return pid.status();
  child.pid = *pid;
  return child;
}

std::string SelfPath() {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  return std::string(buffer, static_cast<size_t>(n));
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string CompanionProgram(
    const std::string& self, const std::string& name,
    const std::function<bool(const std::string&)>& executable) {
  const size_t slash = self.rfind('/');
  if (self.empty() || self[0] != '/' || slash == std::string::npos) return "";
  const std::string dir = self.substr(0, slash + 1);
  for (const std::string& candidate :
       {dir + name, dir + "../libexec/steps/" + name}) {
    if (executable(candidate)) return candidate;
  }
  return "";
}

}  // namespace steps
