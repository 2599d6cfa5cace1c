#include "store/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <filesystem>

namespace steps::store {

std::string RunLockPath(const std::string& state_dir,
                        const std::string& run_id) {
  return (std::filesystem::path(state_dir) / "runs" / (run_id + ".lock"))
      .string();
}

Result<std::unique_ptr<RunLock>> RunLock::Acquire(const std::string& state_dir,
                                                  const std::string& run_id) {
  const std::string path = RunLockPath(state_dir, run_id);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ec);
  if (ec)
    return IoError("cannot create the folder of " + path + ": " + ec.message());
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(path, errno);
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    return ErrnoStatus("lock " + path, errno);
  }
  return std::unique_ptr<RunLock>(new RunLock(path, std::move(fd)));
}

RunLock::~RunLock() {
  // Unlinked while still held: whoever opens it after this finds no file.
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

bool RunIsLocked(const std::string& state_dir, const std::string& run_id) {
  const std::string path = RunLockPath(state_dir, run_id);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return false;
  return errno == EWOULDBLOCK || errno == EINTR;
}

}  // namespace steps::store
