// SIGINT/SIGTERM/SIGHUP for a run: the first signal aborts (cancels the run's
// token), a second cuts the on_abort and ensure hooks that run after it.
#ifndef STEPS_CLI_SIGNALS_H_
#define STEPS_CLI_SIGNALS_H_

#include <atomic>
#include <chrono>
#include <thread>

#include "core/cancel.h"

namespace steps::cli {

class SignalWatcher {
 public:
  // A signal within `echo` of the first counts as the same one delivered
  // twice, not as a second: steps running an across cell in a Slurm job
  // gets Slurm's TERM and its job script's both (cli/slurm_cells.h).
  SignalWatcher(CancelToken abort, CancelToken cleanup,
                std::chrono::milliseconds echo = std::chrono::milliseconds(0));
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // The first signal received (SIGINT, SIGTERM or SIGHUP), or 0.
  int first_signal() const { return first_signal_.load(); }

 private:
  void Watch();
  CancelToken abort_;
  CancelToken cleanup_;
  const std::chrono::milliseconds echo_;
  std::chrono::steady_clock::time_point first_at_;
  std::atomic<int> first_signal_{0};
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace steps::cli

#endif  // STEPS_CLI_SIGNALS_H_
