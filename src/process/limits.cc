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
  Ticket me;
  me.count = count;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_ >= count) {
      free_ -= count;
      return Lease(this, count);
    }
    me.prev = tail_;
    (tail_ ? tail_->next : head_) = &me;
    tail_ = &me;
    ++waiting_;
  }
  {
    // The callback looks for the ticket in the queue before touching it:
    // once granted, it is no longer there (and may be gone).
    Ticket* const mine = &me;
    CancelCallback on_cancel(cancel, [this, mine] {
      {
        std::lock_guard<std::mutex> lock(mu_);
        Ticket* t = head_;
        while (t != nullptr && t != mine) t = t->next;
        if (t == nullptr) return;
        UnlinkLocked(t);
      }
      mine->answer.Give(kCancelled);
    });
    if (me.answer.Wait() == kGranted) return Lease(this, count);
  }
  return Lease();
}

void DescriptorGate::UnlinkLocked(Ticket* t) {
  (t->prev ? t->prev->next : head_) = t->next;
  (t->next ? t->next->prev : tail_) = t->prev;
  t->prev = t->next = nullptr;
  --waiting_;
}

void DescriptorGate::Release(size_t count) {
  Ticket* granted = nullptr;  // Taken off the queue, chained by `next`.
  Ticket* last = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_ += count;
    // A ticket cancelled meanwhile has left the queue; a cancel that comes
    // after this finds its ticket gone.
    for (Ticket* t = head_; t != nullptr && free_ > 0;) {
      Ticket* after = t->next;
      if (free_ >= t->count) {
        free_ -= t->count;
        UnlinkLocked(t);
        (last ? last->next : granted) = t;
        last = t;
      }
      t = after;
    }
  }
  while (granted != nullptr) {
    Ticket* next = granted->next;  // Read before the Give lets it go.
    granted->answer.Give(kGranted);
    granted = next;
  }
}

size_t DescriptorGate::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

size_t DescriptorGate::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_ - free_;
}

}  // namespace steps
