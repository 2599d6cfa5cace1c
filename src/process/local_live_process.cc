// LocalProcessLauncher::Start: a child of this process that runs beside its
// caller (process/live_process.h), ended the way Run ends its children.
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "process/live_process.h"
#include "process/local_launcher.h"
#include "process/proc_stat.h"
#include "process/spawn.h"
#include "process/subreaper.h"

namespace steps {
namespace {

// How long a stop waits for what the child left outside its group.
constexpr Millis kSweepMaxWait{2000};
// Without a pidfd, how often a stop checks whether the leader has exited.
constexpr Millis kExitCheckInterval{20};

UniqueFd OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return UniqueFd();
#endif
}

class LocalLiveProcess : public LiveProcess {
 public:
  LocalLiveProcess(SpawnedChild child, std::string scope, bool use_pidfd,
                   ProcessGroupObserver* groups)
      : pid_(child.pid),
        in_(std::move(child.in)),
        out_(std::move(child.out)),
        err_(std::move(child.err)),
        pidfd_(use_pidfd ? OpenPidfd(child.pid) : UniqueFd()),
        scope_(std::move(scope)),
        groups_(groups) {
    group_.pgid = pid_;
    if (std::optional<ProcStat> stat = ReadProcStat(pid_)) {
      group_.leader_start_time = stat->start_time;
    }
    if (groups_) groups_->OnGroupStart(group_, std::nullopt);
  }

  ~LocalLiveProcess() override { Stop(Millis(0)); }

  int pid() const override { return pid_; }
  int stdin_fd() const override { return in_.get(); }
  int stdout_fd() const override { return out_.get(); }
  int stderr_fd() const override { return err_.get(); }
  void CloseStdin() override { in_.Reset(); }
  int exit_fd() const override { return pidfd_.get(); }

  bool Exited() override { return exit_.Probe(pid_); }

  std::optional<std::string> DescribeExit() override {
    if (!Exited()) return std::nullopt;
    if (exit_.info.si_code == CLD_EXITED) {
      return "exited with code " + std::to_string(exit_.info.si_status);
    }
    int sig = exit_.info.si_status;
    const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
    return "killed by signal " + std::to_string(sig) + " (SIG" +
           (abbrev ? abbrev : "?") + ")";
  }

  void Stop(Millis grace) override {
    if (stopped_) return;
    stopped_ = true;
    in_.Reset();
    if (!Exited() && grace > Millis(0)) {
      kill(-pid_, SIGTERM);
      WaitForExit(grace);
    }
    // The leader, exited or not, is still unreaped: the group id is ours.
    if (!exit_.reaped) {
      kill(-pid_, SIGKILL);
      int status;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      exit_.reaped = true;
    }
    UnregisterChild(pid_);
    out_.Reset();
    err_.Reset();
    pidfd_.Reset();
    SweepScope(scope_, pid_, kSweepMaxWait);
    if (groups_) groups_->OnGroupEnd(group_);
  }

 private:
  // Waits until the leader exits or `grace` has passed.
  void WaitForExit(Millis grace) {
    SteadyTime until = RealClock().Now() + grace;
    while (!Exited()) {
      SteadyTime now = RealClock().Now();
      if (now >= until) return;
      Millis left = std::chrono::duration_cast<Millis>(until - now);
      if (pidfd_.valid()) {
        struct pollfd p = {pidfd_.get(), POLLIN, 0};
        poll(&p, 1, static_cast<int>(left.count()) + 1);
      } else {
        std::this_thread::sleep_for(std::min(left, kExitCheckInterval));
      }
    }
  }

  pid_t pid_;
  UniqueFd in_;
  UniqueFd out_;
  UniqueFd err_;
  UniqueFd pidfd_;
  std::string scope_;
  ProcessGroupObserver* groups_;
  ProcessGroupId group_;
  ChildExit exit_;  // Whether and how the leader ended; whether reaped.
  bool stopped_ = false;
};

}  // namespace

Result<std::unique_ptr<LiveProcess>> LocalProcessLauncher::Start(
    const ProcessRequest& request) {
  ProcessRequest piped = request;
  piped.stdin_text = std::string();  // A pipe, kept open for the caller.
  const std::string scope = IsChildSubreaper() ? BeginProcessScope() : "";
  Result<SpawnedChild> child = SpawnChild(piped, base_env_, scope);
  if (!child.ok()) {
    SweepScope(scope, 0, kSweepMaxWait);  // Ends the scope; nothing to wait.
    return child.status();
  }
  return std::unique_ptr<LiveProcess>(std::make_unique<LocalLiveProcess>(
      std::move(*child), scope, options_.use_pidfd, options_.groups));
}

}  // namespace steps
