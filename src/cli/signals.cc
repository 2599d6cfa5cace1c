#include "cli/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace steps::cli {
namespace {

// The write end of the watcher's pipe, for the async-signal-safe handler.
std::atomic<int> g_signal_fd{-1};

void OnSignal(int sig) {
  int fd = g_signal_fd.load();
  if (fd < 0) return;
  unsigned char b = static_cast<unsigned char>(sig);
  int saved = errno;
  (void)!write(fd, &b, 1);
  errno = saved;
}

}  // namespace

SignalWatcher::SignalWatcher(CancelToken abort, CancelToken cleanup,
                             std::chrono::milliseconds echo)
    : abort_(std::move(abort)), cleanup_(std::move(cleanup)), echo_(echo) {
  if (pipe2(pipe_, O_CLOEXEC) != 0) return;
  g_signal_fd = pipe_[1];
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  thread_ = std::thread([this] { Watch(); });
}

SignalWatcher::~SignalWatcher() {
  if (pipe_[1] < 0) return;
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  g_signal_fd = -1;
  unsigned char stop = 0;
  (void)!write(pipe_[1], &stop, 1);
  thread_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

void SignalWatcher::Watch() {
  while (true) {
    unsigned char b = 0;
    ssize_t n = read(pipe_[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 0) return;
    int expected = 0;
    const auto now = std::chrono::steady_clock::now();
    if (first_signal_.compare_exchange_strong(expected, b)) {
      first_at_ = now;
      abort_.Cancel(CancelReason::kAbort);
    } else if (now - first_at_ >= echo_) {
      cleanup_.Cancel(CancelReason::kAbort);
    }
  }
}

}  // namespace steps::cli
