// A run's lock: while `steps run` (or `steps test`) runs, it holds an
// exclusive flock on STATE_DIR/runs/RUN.lock. The kernel drops the lock when
// the process dies, however it dies (SIGKILL, the OOM killer), so a run
// whose lock is free is a run that is over: what it recorded as running
// (process groups, see store/process_groups.h) is left over.
#ifndef STEPS_STORE_RUN_LOCK_H_
#define STEPS_STORE_RUN_LOCK_H_

#include <memory>
#include <string>

#include "core/status.h"
#include "process/unique_fd.h"

namespace steps::store {

// STATE_DIR/runs/RUN.lock.
std::string RunLockPath(const std::string& state_dir,
                        const std::string& run_id);

class RunLock {
 public:
  // Creates the file (and its folder) and takes the lock. The descriptor is
  // close-on-exec: a child that outlives us must not keep the run "alive".
  // Errors when the file cannot be created or the lock is already held.
  static Result<std::unique_ptr<RunLock>> Acquire(const std::string& state_dir,
                                                  const std::string& run_id);
  // Removes the file and releases the lock.
  ~RunLock();

  // The locked descriptor: a process given a duplicate of it (the run's
  // guardian, process/guardian.h) holds the lock as long as it keeps it.
  int fd() const { return fd_.get(); }

  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  RunLock(std::string path, UniqueFd fd)
      : path_(std::move(path)), fd_(std::move(fd)) {}

  std::string path_;
  UniqueFd fd_;
};

// True when a live process holds the run's lock. False when the lock is free
// or its file is missing (the run ended, or died). Never blocks.
bool RunIsLocked(const std::string& state_dir, const std::string& run_id);

}  // namespace steps::store

#endif  // STEPS_STORE_RUN_LOCK_H_
