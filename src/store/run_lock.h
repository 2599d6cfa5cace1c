// A run's lock: while `steps run` (or `steps test`) runs, it holds an
// exclusive flock on STATE_DIR/runs/RUN.lock. The kernel drops the lock when
// the process dies, however it dies (SIGKILL, the OOM killer), so a run
// whose lock is free is a run that is over: what it recorded as running
// (process groups, see store/process_groups.h) is left over.
#ifndef STEPS_STORE_RUN_LOCK_H_
#define STEPS_STORE_RUN_LOCK_H_

#include <memory>
#include <string>

#include "core/clock.h"
#include "core/duration.h"
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
  // Errors when the file cannot be created, and with kUnavailable when the
  // lock is already held.
  static Result<std::unique_ptr<RunLock>> Acquire(const std::string& state_dir,
                                                  const std::string& run_id);
  // As Acquire, but while another process holds the lock it looks again
  // every kLookAgain until `within` has passed on `clock`: a run that was
  // just killed stays held by its guardian while it ends what the run left
  // running and records it (process/guardian.h). kUnavailable when the
  // lock is still held then; other errors at once.
  static Result<std::unique_ptr<RunLock>> AcquireWithin(
      const std::string& state_dir, const std::string& run_id, Millis within,
      Clock& clock);
  static constexpr Millis kLookAgain{10};
  // Removes the file (unless told to keep it) and releases the lock.
  ~RunLock();

  // Whether the file stays when the lock goes: it does while a resume has
  // not started the run again (refused, say), so that the run still reads
  // as one that died, also on another machine (docs/resume.md).
  void KeepFile(bool keep) { keep_file_ = keep; }

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
  bool keep_file_ = false;
};

// True when a live process holds the run's lock. False when the lock is free
// or its file is missing (the run ended, or died). Never blocks.
bool RunIsLocked(const std::string& state_dir, const std::string& run_id);

}  // namespace steps::store

#endif  // STEPS_STORE_RUN_LOCK_H_
