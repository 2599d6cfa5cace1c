#include "process/local_launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <utility>

#include "core/clock.h"
#include "core/fiber.h"
#include "process/limits.h"
#include "process/live_process.h"
#include "process/output_capture.h"
#include "process/proc_stat.h"
#include "process/spawn.h"
#include "process/subreaper.h"

extern char** environ;

namespace steps {
namespace {

// Without a pidfd, how often the child's state is checked.
constexpr Millis kExitCheckInterval{20};
// How long a run's end waits for what it killed outside its group to die.
constexpr Millis kSweepMaxWait{2000};
// Bytes read from one pipe before giving the other fds a turn.
constexpr size_t kReadBurst = 1024 * 1024;

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry)
    env.emplace_back(*entry);
  return env;
}

// An eventfd the cancel callback writes to. Shared with the callback, which
// may still run after the run has unregistered it (CancelToken runs
// callbacks outside its lock), so the descriptor lives until both are done.
struct Wakeup {
  UniqueFd fd;
  void Signal() const {
    uint64_t one = 1;
    ssize_t n = write(fd.get(), &one, sizeof one);
    (void)n;  // EAGAIN means a wakeup is already pending.
  }
  void Drain() const {
    uint64_t value;
    ssize_t n = read(fd.get(), &value, sizeof value);
    (void)n;
  }
};

// A descriptor that becomes readable when `pid` exits; invalid where the
// kernel has no pidfd_open (before 5.3). Called through syscall() because
// not every libc declares it.
UniqueFd OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return UniqueFd();
#endif
}

struct timespec ToTimespec(SteadyTime::duration d) {
  if (d < SteadyTime::duration::zero()) d = SteadyTime::duration::zero();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(d);
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(d - secs);
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(secs.count());
  ts.tv_nsec = static_cast<long>(nanos.count());
  return ts;
}

// One output pipe: its capture and its line splitter.
struct OutputPipe {
  OutputPipe(UniqueFd pipe_fd, OutputStream which, const ProcessRequest& req)
      : fd(std::move(pipe_fd)),
        stream(which),
        capture(req.max_captured_bytes, req.keep) {
    if (req.on_line) {
      const LineCallback* callback = &req.on_line;
      lines = std::make_unique<LineSplitter>(
          ProcessRequest::kMaxLineBytes,
          [callback, which](std::string_view line) {
            (*callback)(which, line);
          });
    }
  }

  // Reads what is available (up to a burst); closes the fd at EOF or error.
  void ReadAvailable() {
    char buf[64 * 1024];
    size_t total = 0;
    while (fd.valid() && total < kReadBurst) {
      ssize_t n = read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        std::string_view data(buf, static_cast<size_t>(n));
        capture.Append(data);
        if (lines) lines->Feed(data);
        total += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        return;
      } else {
        fd.Reset();
      }
    }
  }

  void Finish(CapturedOutput& out) {
    fd.Reset();
    if (lines) lines->Flush();
    out = capture.Finish();
  }

  UniqueFd fd;
  OutputStream stream;
  BoundedCapture capture;
  std::unique_ptr<LineSplitter> lines;  // Only with a line callback.
};

// The state of one started child until Run returns.
class ChildRun {
 public:
  ChildRun(Clock& clock, const ProcessRequest& request, SpawnedChild child,
           std::shared_ptr<Wakeup> wakeup, bool use_pidfd)
      : clock_(clock),
        request_(request),
        pid_(child.pid),
        pidfd_(use_pidfd ? OpenPidfd(child.pid) : UniqueFd()),
        out_(std::move(child.out), OutputStream::kStdout, request),
        err_(std::move(child.err), OutputStream::kStderr, request),
        in_(std::move(child.in)),
        wakeup_(std::move(wakeup)) {
    if (request_.stdin_text) stdin_left_ = *request_.stdin_text;
    if (stdin_left_.empty()) in_.Reset();
  }

  // Never leaves the child or its group behind, even on an early return.
  ~ChildRun() {
    if (!exit_.reaped) {
      kill(-pid_, SIGKILL);
      int status;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    UnregisterChild(pid_);
  }

  ChildRun(const ChildRun&) = delete;
  ChildRun& operator=(const ChildRun&) = delete;

  void Wait(ProcessResult& result);

 private:
  enum class Trigger { kNone, kDeadline, kCancel };

  // True once the leader has exited (its status kept in exit_.info), without
  // reaping it.
  bool LeaderExited();
  void Reap();
  void Terminate(Trigger why, SteadyTime now);
  // The next time the loop must act without an fd event; nullopt: none.
  std::optional<SteadyTime> NextWake(SteadyTime now) const;
  void WriteStdin();
  void Poll(std::optional<SteadyTime> wake_at, SteadyTime now);
  void FillResult(ProcessResult& result);

  Clock& clock_;
  const ProcessRequest& request_;
  pid_t pid_;
  UniqueFd pidfd_;
  OutputPipe out_;
  OutputPipe err_;
  UniqueFd in_;
  std::string_view stdin_left_;
  std::shared_ptr<Wakeup> wakeup_;

  Trigger trigger_ = Trigger::kNone;
  std::optional<SteadyTime> kill_at_;
  bool escalated_ = false;
  ChildExit exit_;  // Whether and how the leader ended; whether reaped.
  std::optional<SteadyTime> drain_until_;
};

bool ChildRun::LeaderExited() { return exit_.Probe(pid_); }

void ChildRun::Reap() {
  if (exit_.reaped) return;
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_.reaped = true;
}

void ChildRun::Terminate(Trigger why, SteadyTime now) {
  trigger_ = why;
  if (request_.kill_grace <= Millis(0)) {
    kill(-pid_, SIGKILL);
    escalated_ = true;
    return;
  }
  kill(-pid_, SIGTERM);
  kill_at_ = now + request_.kill_grace;
}

std::optional<SteadyTime> ChildRun::NextWake(SteadyTime now) const {
  std::optional<SteadyTime> at;
  if (exit_.exited) {
    at = drain_until_;
  } else if (trigger_ == Trigger::kNone) {
    if (request_.deadline.is_set()) at = request_.deadline.at();
  } else if (!escalated_) {
    at = kill_at_;
  }
  if (!exit_.exited && !pidfd_.valid()) {
    SteadyTime check = now + kExitCheckInterval;
    if (!at || check < *at) at = check;
  }
  return at;
}

void ChildRun::WriteStdin() {
  while (in_.valid() && !stdin_left_.empty()) {
    size_t chunk = std::min<size_t>(stdin_left_.size(), 64 * 1024);
    ssize_t n = WriteWithoutSigpipe(in_.get(), stdin_left_.data(), chunk);
    if (n > 0) {
      stdin_left_.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      break;  // EPIPE: the child stopped reading; that is its business.
    }
  }
  in_.Reset();
}

void ChildRun::Poll(std::optional<SteadyTime> wake_at, SteadyTime now) {
  struct pollfd fds[5];
  OutputPipe* pipes[2] = {nullptr, nullptr};
  nfds_t n = 0;
  int in_index = -1, wake_index = -1;
  for (OutputPipe* pipe : {&out_, &err_}) {
    if (!pipe->fd.valid()) continue;
    pipes[n] = pipe;
    fds[n++] = {pipe->fd.get(), POLLIN, 0};
  }
  nfds_t pipe_count = n;
  if (in_.valid()) {
    in_index = static_cast<int>(n);
    fds[n++] = {in_.get(), POLLOUT, 0};
  }
  if (!exit_.exited && pidfd_.valid()) fds[n++] = {pidfd_.get(), POLLIN, 0};
  wake_index = static_cast<int>(n);
  fds[n++] = {wakeup_->fd.get(), POLLIN, 0};

  struct timespec timeout;
  struct timespec* timeout_ptr = nullptr;
  if (wake_at) {
    timeout = ToTimespec(*wake_at - now);
    timeout_ptr = &timeout;
  }
  int rc = ppoll(fds, n, timeout_ptr, nullptr);
  if (rc <= 0) return;  // Timeout, EINTR: the loop re-evaluates.
  for (nfds_t i = 0; i < pipe_count; ++i) {
    if (fds[i].revents) pipes[i]->ReadAvailable();
  }
  if (in_index >= 0 && fds[in_index].revents) WriteStdin();
  if (fds[wake_index].revents) wakeup_->Drain();
}

void ChildRun::Wait(ProcessResult& result) {
  WriteStdin();
  while (true) {
    SteadyTime now = clock_.Now();
    if (!exit_.exited && LeaderExited()) {
      // Stragglers die with the leader; the zombie leader pins the group id.
      // (If something else reaped it, the id may be reused: no signal then.)
      if (!exit_.reaped) {
        kill(-pid_, SIGKILL);
        Reap();
      }
      in_.Reset();
      drain_until_ = now + request_.drain_timeout;
    }
    if (exit_.exited) {
      bool pipes_open = out_.fd.valid() || err_.fd.valid();
      if (!pipes_open || now >= *drain_until_ || request_.cancel.cancelled()) {
        break;
      }
    } else {
      if (trigger_ == Trigger::kNone) {
        if (request_.cancel.cancelled()) {
          Terminate(Trigger::kCancel, now);
        } else if (request_.deadline.is_set() &&
                   now >= request_.deadline.at()) {
          Terminate(Trigger::kDeadline, now);
        }
      }
      if (kill_at_ && !escalated_ && now >= *kill_at_) {
        kill(-pid_, SIGKILL);
        escalated_ = true;
      }
    }
    Poll(NextWake(now), now);
  }
  // Whatever is already buffered is kept, even when the drain was cut short.
  out_.ReadAvailable();
  err_.ReadAvailable();
  FillResult(result);
}

void ChildRun::FillResult(ProcessResult& result) {
  out_.Finish(result.out);
  err_.Finish(result.err);
  result.pid = pid_;
  result.escalated_to_kill = escalated_;
  if (exit_.info.si_code == CLD_EXITED) {
    result.exit_code = exit_.info.si_status;
  } else {
    result.term_signal = exit_.info.si_status;
  }
  switch (trigger_) {
    case Trigger::kDeadline:
      result.end = ProcessEnd::kTimedOut;
      break;
    case Trigger::kCancel:
      result.end = ProcessEnd::kCancelled;
      break;
    case Trigger::kNone:
      result.end =
          result.exit_code ? ProcessEnd::kExited : ProcessEnd::kSignaled;
      break;
  }
}

}  // namespace

std::vector<std::string> CurrentEnvironmentWithout(
    const std::vector<std::string>& withheld) {
  std::vector<std::string> env;
  for (std::string& entry : CurrentEnvironment()) {
    std::string_view name(entry);
    name = name.substr(0, name.find('='));
    if (std::find(withheld.begin(), withheld.end(), name) == withheld.end())
      env.push_back(std::move(entry));
  }
  return env;
}

LocalProcessLauncher::LocalProcessLauncher(Clock& clock)
    : LocalProcessLauncher(clock, CurrentEnvironment()) {}

LocalProcessLauncher::LocalProcessLauncher()
    : LocalProcessLauncher(RealClock()) {}

LocalProcessLauncher::LocalProcessLauncher(Clock& clock,
                                           LocalLauncherOptions options)
    : LocalProcessLauncher(clock, CurrentEnvironment(), options) {}

LocalProcessLauncher::LocalProcessLauncher(Clock& clock,
                                           std::vector<std::string> base_env,
                                           LocalLauncherOptions options)
    : clock_(clock), base_env_(std::move(base_env)), options_(options) {}

ProcessResult LocalProcessLauncher::Run(const ProcessRequest& request) {
  const SteadyTime start = clock_.Now();
  ProcessResult result;
  auto ended = [&](ProcessEnd end) {
    result.end = end;
    result.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
    return result;
  };
  if (request.cancel.cancelled()) return ended(ProcessEnd::kCancelled);
  if (request.deadline.Expired(clock_)) return ended(ProcessEnd::kTimedOut);
  // A fan-out wider than the descriptor limit allows waits here for a
  // running child to end, instead of failing to start with EMFILE; a
  // fiber parks while it waits.
  DescriptorGate::Lease slot =
      DescriptorGate::Processes().Acquire(request.cancel);
  if (!slot.held()) return ended(ProcessEnd::kCancelled);
  // Waiting for a child (poll on its pipes, waitpid) blocks in the kernel:
  // a fiber hands that to a thread of its own and parks meanwhile.
  return OffFiber([&] { return RunHere(request, start); });
}

ProcessResult LocalProcessLauncher::RunHere(const ProcessRequest& request,
                                            SteadyTime start) {
  ProcessResult result;
  auto finish = [&]() -> ProcessResult {
    result.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
    return std::move(result);
  };

  auto wakeup = std::make_shared<Wakeup>();
  wakeup->fd.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeup->fd.valid()) {
    result.error = ErrnoStatus("eventfd", errno).message();
    return finish();
  }
  CancelCallback on_cancel(request.cancel, [wakeup] { wakeup->Signal(); });

  // Only a subreaper can find what leaves the group, so only then is the
  // run given a scope to be found by.
  const std::string scope = IsChildSubreaper() ? BeginProcessScope() : "";
  Result<SpawnedChild> child = SpawnChild(request, base_env_, scope);
  if (!child.ok()) {
    SweepScope(scope, 0, kSweepMaxWait);  // Ends the scope; nothing to wait.
    result.end = ProcessEnd::kFailedToStart;
    result.error = child.status().message();
    return finish();
  }
  ProcessGroupId group{child->pid, 0};
  if (std::optional<ProcStat> stat = ReadProcStat(group.pgid)) {
    group.leader_start_time = stat->start_time;
  }
  if (options_.groups) {
    std::optional<SteadyTime> wait_until;
    if (request.deadline.is_set()) {
      wait_until = OnRealClock(clock_, request.deadline.at());
    }
    options_.groups->OnGroupStart(group, wait_until);
  }
  {
    ChildRun run(clock_, request, std::move(*child), wakeup,
                 options_.use_pidfd);
    run.Wait(result);
  }
  SweepScope(scope, group.pgid, kSweepMaxWait);
  if (options_.groups) options_.groups->OnGroupEnd(group);
  return finish();
}

ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  ssize_t n = write(fd, data, size);
  int err = errno;
  if (n < 0 && err == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = err;
  return n;
}

}  // namespace steps
