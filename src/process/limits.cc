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

namespace {

constexpr uint64_t kMaxSlots = 1 << 20;

uint64_t Usable(uint64_t limit) {
  return limit > kReservedDescriptors ? limit - kReservedDescriptors : 0;
}

uint64_t SoftLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  return limit.rlim_cur == RLIM_INFINITY
             ? UINT64_MAX
             : static_cast<uint64_t>(limit.rlim_cur);
}

size_t Clamp(uint64_t slots) {
  return static_cast<size_t>(std::clamp<uint64_t>(slots, 1, kMaxSlots));
}

}  // namespace

size_t DescriptorGate::ConversationSlotsFor(uint64_t limit) {
  uint64_t usable = std::min<uint64_t>(Usable(limit), kMaxSlots * 4);
  return Clamp(usable / 4 * 3 / kDescriptorsPerConversation);
}

size_t DescriptorGate::ProcessSlotsFor(uint64_t limit) {
  uint64_t usable = std::min<uint64_t>(Usable(limit), kMaxSlots * 4);
  return Clamp(usable / 4 / kDescriptorsPerProcess);
}

DescriptorGate& DescriptorGate::Conversations() {
  static DescriptorGate* gate =  // Never destroyed.
      new DescriptorGate(ConversationSlotsFor(SoftLimit()));
  return *gate;
}

DescriptorGate& DescriptorGate::Processes() {
  static DescriptorGate* gate =  // Never destroyed.
      new DescriptorGate(ProcessSlotsFor(SoftLimit()));
  return *gate;
}

DescriptorGate::Lease DescriptorGate::Acquire(const CancelToken& cancel,
                                              size_t count) {
  count = std::clamp<size_t>(count, 1, slots_);
  CancelCallback wake(cancel, [this] {
    std::lock_guard<std::mutex> lock(mu_);
    freed_.NotifyAll();
  });
  std::unique_lock<std::mutex> lock(mu_);
  freed_.Wait(lock, [&] { return free_ >= count || cancel.cancelled(); });
  if (free_ < count) return Lease();
  free_ -= count;
  return Lease(this, count);
}

void DescriptorGate::Release(size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  free_ += count;
  freed_.NotifyAll();
}

size_t DescriptorGate::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_ - free_;
}

}  // namespace steps
