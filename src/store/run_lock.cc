#include "store/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

namespace steps::store {

std::string RunLockPath(const std::string& state_dir,
                        const std::string& run_id) {
  return (std::filesystem::path(state_dir) / "runs" / (run_id + ".lock"))
      .string();
}

namespace {

// One try: the locked descriptor, or why not (kUnavailable: another
// process holds the lock). A lock taken on a file that its holder unlinked
// before letting go (RunLock's destructor) is a lock on nothing: the file
// is opened anew.
Result<UniqueFd> TryLock(const std::string& path) {
  for (int tries = 0; tries < 100; ++tries) {
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoStatus(path, errno);
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK || errno == EINTR) {
        return Status(StatusCode::kUnavailable,
                      "lock " + path + ": held by another process");
      }
      return ErrnoStatus("lock " + path, errno);
    }
    struct stat held, named;
    if (fstat(fd.get(), &held) == 0 && stat(path.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      return fd;
    }
  }
  return Status(StatusCode::kUnavailable,
                "lock " + path + ": the file keeps being replaced");
}

}  // namespace

Result<std::unique_ptr<RunLock>> RunLock::Acquire(const std::string& state_dir,
                                                  const std::string& run_id) {
  const std::string path = RunLockPath(state_dir, run_id);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ec);
  if (ec)
    return IoError("cannot create the folder of " + path + ": " + ec.message());
  Result<UniqueFd> fd = TryLock(path);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<RunLock>(new RunLock(path, std::move(*fd)));
}

Result<std::unique_ptr<RunLock>> RunLock::AcquireWithin(
    const std::string& state_dir, const std::string& run_id, Millis within,
    Clock& clock) {
  const SteadyTime until = clock.Now() + within;
  const CancelToken never;
  while (true) {
    Result<std::unique_ptr<RunLock>> lock = Acquire(state_dir, run_id);
    // Held is the one answer worth another look. (Asking RunIsLocked
    // instead would misread a holder that let go in between.)
    if (lock.ok() || lock.status().code() != StatusCode::kUnavailable)
      return lock;
    const SteadyTime now = clock.Now();
    if (now >= until) {
      return Status(StatusCode::kUnavailable,
                    "run " + run_id + " is still held by another process after " +
                        FormatDuration(within) + " (" +
                        RunLockPath(state_dir, run_id) + ")");
    }
    clock.SleepUntil(std::min(until, now + kLookAgain), never);
  }
}

RunLock::~RunLock() {
  // Unlinked while still held: whoever opens it after this finds no file.
  if (keep_file_) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

bool RunIsLocked(const std::string& state_dir, const std::string& run_id) {
  const std::string path = RunLockPath(state_dir, run_id);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  // A shared lock: it fails while a run holds its exclusive one, and two
  // processes asking at once (`steps runs`, a resume's first read) never
  // take each other for the run.
  if (flock(fd.get(), LOCK_SH | LOCK_NB) == 0) return false;
  return errno == EWOULDBLOCK || errno == EINTR;
}

}  // namespace steps::store
