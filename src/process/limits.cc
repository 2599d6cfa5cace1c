#include "process/limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

namespace steps {

Result<uint64_t> RaiseOpenFileLimit() {
  constexpr rlim_t kCeiling = 1 << 20;
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return ErrnoStatus("getrlimit(RLIMIT_NOFILE)", errno);
  }
  rlim_t want = limit.rlim_max == RLIM_INFINITY
                    ? kCeiling
                    : std::min<rlim_t>(limit.rlim_max, kCeiling);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < want) {
    limit.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return ErrnoStatus("setrlimit(RLIMIT_NOFILE)", errno);
    }
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

size_t DescriptorGate::SlotsFor(uint64_t limit) {
  constexpr uint64_t kMaxSlots = 65536;
  if (limit <= kReservedDescriptors + kDescriptorsPerConversation) return 1;
  return static_cast<size_t>(std::min<uint64_t>(
      kMaxSlots, (limit - kReservedDescriptors) / kDescriptorsPerConversation));
}

DescriptorGate& DescriptorGate::Process() {
  static DescriptorGate* gate = [] {
    struct rlimit limit;
    uint64_t soft = 1024;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
      soft = limit.rlim_cur == RLIM_INFINITY
                 ? UINT64_MAX
                 : static_cast<uint64_t>(limit.rlim_cur);
    }
    return new DescriptorGate(SlotsFor(soft));  // Never destroyed.
  }();
  return *gate;
}

DescriptorGate::Lease DescriptorGate::Acquire(const CancelToken& cancel) {
  CancelCallback wake(cancel, [this] {
    std::lock_guard<std::mutex> lock(mu_);
    freed_.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu_);
  freed_.wait(lock, [&] { return free_ > 0 || cancel.cancelled(); });
  if (free_ == 0) return Lease();
  --free_;
  return Lease(this);
}

void DescriptorGate::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  ++free_;
  freed_.notify_one();
}

size_t DescriptorGate::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_ - free_;
}

}  // namespace steps
