// UniqueFd: the one owner of a file descriptor.
#ifndef STEPS_PROCESS_UNIQUE_FD_H_
#define STEPS_PROCESS_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace steps {

// Closes its descriptor when destroyed. Copy deleted, move noexcept.
// Not thread-safe: one owner at a time.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }

  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }

  bool valid() const { return fd_ >= 0; }
  int get() const { return fd_; }

  // Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }
  // Closes the current descriptor (if any) and owns `fd` instead.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace steps

#endif  // STEPS_PROCESS_UNIQUE_FD_H_
