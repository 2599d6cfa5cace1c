// Process-wide limits that running many children at once runs into.
#ifndef STEPS_PROCESS_LIMITS_H_
#define STEPS_PROCESS_LIMITS_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/cancel.h"
#include "core/status.h"

namespace steps {

// Each concurrent run holds about six descriptors (pipes, pidfd, eventfd),
// so a wide fan-out can pass the common soft limit of 1024. Raises the soft
// RLIMIT_NOFILE to the hard limit (at most 1M) and returns the soft limit
// now in effect. Call once at startup, before threads start; children
// inherit the raised limit.
Result<uint64_t> RaiseOpenFileLimit();

// Descriptors set aside for everything that is not a conversation: the
// store, logs, the UI server, tasks' pipes.
inline constexpr uint64_t kReservedDescriptors = 128;
// Descriptors one conversation may hold at once: its HTTP channel (a
// socket and libcurl's wakeup pair) and the pipes of a tool's process.
inline constexpr uint64_t kDescriptorsPerConversation = 8;

// Admission by file descriptors: a counting gate that a wide fan-out's
// conversations pass one slot each, so that excess ones wait for a slot
// instead of failing with EMFILE. Thread-safe.
class DescriptorGate {
 public:
  // REQUIRES: slots >= 1.
  explicit DescriptorGate(size_t slots) : free_(slots), slots_(slots) {}
  DescriptorGate(const DescriptorGate&) = delete;
  DescriptorGate& operator=(const DescriptorGate&) = delete;

  // The process-wide gate, sized at first use from the soft RLIMIT_NOFILE
  // (after RaiseOpenFileLimit): (limit - kReservedDescriptors) /
  // kDescriptorsPerConversation, at least 1, at most 65536.
  static DescriptorGate& Process();
  // The number of slots for a descriptor limit of `limit`.
  static size_t SlotsFor(uint64_t limit);

  // Holds one slot until destroyed (or holds none, see Acquire).
  class Lease {
   public:
    Lease() = default;
    explicit Lease(DescriptorGate* gate) : gate_(gate) {}
    ~Lease() {
      if (gate_) gate_->Release();
    }
    Lease(Lease&& other) noexcept : gate_(other.gate_) {
      other.gate_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return gate_ != nullptr; }

   private:
    DescriptorGate* gate_ = nullptr;
  };

  // Blocks until a slot is free, or until `cancel` fires: then the lease
  // holds nothing and the caller carries on into its own cancellation.
  Lease Acquire(const CancelToken& cancel);
  size_t slots() const { return slots_; }
  size_t in_use() const;

 private:
  void Release();

  mutable std::mutex mu_;
  std::condition_variable freed_;
  size_t free_;
  const size_t slots_;
};

}  // namespace steps

#endif  // STEPS_PROCESS_LIMITS_H_
