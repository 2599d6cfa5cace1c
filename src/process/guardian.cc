#include "process/guardian.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <thread>

#include "process/proc_stat.h"
#include "process/recorded_group.h"
#include "process/spawn.h"
#include "process/subreaper.h"

extern char** environ;

namespace steps {
namespace {

// How often EndLeftovers looks again while something it killed is dying.
constexpr std::chrono::milliseconds kPoll{5};
// EndLeftovers stops after this many looks in a row that find nothing: a
// process seen between fork and exit (one that keeps forking a new copy
// of itself) is missed by one look, not by several.
constexpr int kQuietLooks = 5;
// The program that is this one: `steps __guard` guards a run itself.
constexpr char kSelf[] = "/proc/self/exe";
// Descriptors the spawn moves into place are first moved at least here.
constexpr int kFirstFreeFd = 10;
// How long a run waits at its end for the guardian to exit before it kills
// it (a stopped guardian must not hold the run).
constexpr std::chrono::milliseconds kGuardianExitWait{2000};

// Our environment without STEPS_PROCESS_SCOPE: the guardian belongs to no
// step, and must not be taken for one by an outer run's guardian.
std::vector<std::string> GuardianEnvironment() {
  const std::string scope = std::string(kProcessScopeVar) + "=";
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    if (entry.compare(0, scope.size(), scope) != 0) env.push_back(entry);
  }
  return env;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::string GuardianProgram(
    const std::string& self,
    const std::function<bool(const std::string&)>& executable) {
  std::string program = CompanionProgram(self, kGuardianProgram, executable);
  return program.empty() ? kSelf : program;
}

Result<std::unique_ptr<RunGuardian>> RunGuardian::Start(
    const std::vector<std::string>& args, int pass_fd) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return ErrnoStatus("socketpair", errno);
  }
  UniqueFd ours(pair[0]);
  // Above the standard descriptors, so that the dup2s below never clobber
  // one source with another (a run started with stdin closed would have
  // its lock on descriptor 0).
  UniqueFd theirs(fcntl(pair[1], F_DUPFD_CLOEXEC, kFirstFreeFd));
  close(pair[1]);
  UniqueFd lock;
  if (pass_fd >= 0) lock.Reset(fcntl(pass_fd, F_DUPFD_CLOEXEC, kFirstFreeFd));
  if (!theirs.valid() || (pass_fd >= 0 && !lock.valid())) {
    return ErrnoStatus("starting the run's guardian", errno);
  }
  // Our own program, for steps-guardian to become if the run dies: O_PATH,
  // which needs no permission to read it (a program one may only run).
  // Without it, `steps` guards its run itself.
  UniqueFd self(open(kSelf, O_PATH | O_CLOEXEC));
  if (self.valid() && self.get() < kFirstFreeFd) {
    self.Reset(fcntl(self.get(), F_DUPFD_CLOEXEC, kFirstFreeFd));
  }
  std::vector<std::string> argv_strings{"steps", kGuardianCommand};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = GuardianEnvironment();
  // A session of its own: a terminal's Ctrl-C or hang-up never reaches it.
  SpawnSetup setup(SpawnGroup::kOwnSession);
  posix_spawn_file_actions_t* actions = setup.actions();
  posix_spawn_file_actions_adddup2(actions, theirs.get(), STDIN_FILENO);
  posix_spawn_file_actions_addopen(actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  if (lock.valid()) {
    posix_spawn_file_actions_adddup2(actions, lock.get(), kGuardianLockFd);
  } else {
    posix_spawn_file_actions_addclose(actions, kGuardianLockFd);
  }
  if (self.valid()) {
    posix_spawn_file_actions_adddup2(actions, self.get(), kGuardianStepsFd);
  }
  // Nothing else we were given (a caller's stray descriptors) goes along.
  posix_spawn_file_actions_addclosefrom_np(actions, kGuardianStepsFd + 1);
  // A guardian program that cannot be started (not a program for this
  // machine, say) is no reason to go unguarded: `steps` guards itself.
  const std::string program =
      self.valid() ? GuardianProgram(SelfPath(), IsExecutableFile)
                   : std::string(kSelf);
  Result<pid_t> pid = setup.Spawn(program, argv_strings, env_strings,
                                  "starting the run's guardian " + program);
  if (!pid.ok() && program != kSelf) {
    pid = setup.Spawn(kSelf, std::move(argv_strings), std::move(env_strings),
                      "starting the run's guardian");
  }
  if (!pid.ok()) return pid.status();
  return std::unique_ptr<RunGuardian>(new RunGuardian(*pid, std::move(ours)));
}

bool RunGuardian::Lost() {
  if (exited_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) exited_ = true;
  return exited_;
}

RunGuardian::~RunGuardian() {
  // MSG_NOSIGNAL: a guardian that is gone already is no reason to die.
  (void)send(socket_.get(), &kGuardianCleanEnd, 1, MSG_NOSIGNAL);
  socket_.Reset();
  const auto give_up = std::chrono::steady_clock::now() + kGuardianExitWait;
  while (!Lost()) {
    if (std::chrono::steady_clock::now() >= give_up) {
      kill(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  UnregisterChild(pid_);
}

LeftoverEnd EndLeftovers(pid_t starter,
                         const std::vector<ProcessGroupId>& groups,
                         Millis max_wait, std::vector<bool>* ended) {
  LeftoverEnd result;
  std::set<pid_t> killed_groups;
  ended->assign(groups.size(), false);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (KillRecordedGroup(groups[i]) == RecordedGroupEnd::kKilled) {
      (*ended)[i] = true;
      ++result.groups_killed;
      killed_groups.insert(groups[i].pgid);
    }
  }
  const std::string scope_prefix = std::to_string(starter) + ".";
  std::set<pid_t> escaped;
  const auto give_up = std::chrono::steady_clock::now() + max_wait;
  int quiet = 0;
  while (true) {
    bool running = false;
    for (const ProcStat& p : ListProcesses()) {
      if (p.state == 'Z' || p.state == 'X' || p.pid == getpid()) continue;
      bool ours = killed_groups.count(p.pgid) > 0;
      if (!ours) {
        std::optional<std::string> scope = ReadProcEnv(p.pid, kProcessScopeVar);
        ours = scope && StartsWith(*scope, scope_prefix);
      }
      if (!ours) continue;
      kill(p.pid, SIGKILL);
      if (killed_groups.count(p.pgid) == 0) escaped.insert(p.pid);
      running = true;
    }
    quiet = running ? 0 : quiet + 1;
    if (quiet >= kQuietLooks || std::chrono::steady_clock::now() >= give_up)
      break;
    std::this_thread::sleep_for(kPoll);
  }
  result.escaped_killed = static_cast<int>(escaped.size());
  return result;
}

}  // namespace steps
