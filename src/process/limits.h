// Process-wide limits that running many children at once runs into.
#ifndef STEPS_PROCESS_LIMITS_H_
#define STEPS_PROCESS_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/cancel.h"
#include "core/fiber.h"
#include "core/status.h"

namespace steps {

// Each running child holds about six descriptors (pipes, pidfd, eventfd)
// and each conversation a socket, so a wide fan-out can pass the common
// soft limit of 1024. Raises the soft
// RLIMIT_NOFILE to the hard limit (at most 1M) and returns the soft limit
// now in effect. Call once at startup, before threads start; children
// inherit the raised limit.
Result<uint64_t> RaiseOpenFileLimit();

// Descriptors set aside for everything that is neither a conversation nor
// a child process: the store, logs, the UI server, the transport's own.
inline constexpr uint64_t kReservedDescriptors = 128;
// Descriptors one conversation holds: its request's socket on the shared
// transport (or the connection kept open for its next request).
inline constexpr uint64_t kDescriptorsPerConversation = 1;
// Descriptors a conversation that starts MCP servers holds per server
// (their pipes and process handles), on top of its own.
inline constexpr uint64_t kDescriptorsPerMcpServer = 8;
// Descriptors one running child process holds (its pipes, pidfd, eventfd).
inline constexpr uint64_t kDescriptorsPerProcess = 8;

// Admission by file descriptors: a counting gate that work passes before it
// opens descriptors, so that a fan-out wider than the limit waits for room
// instead of failing with EMFILE. Two gates share the limit: conversations
// (three quarters) and child processes (a quarter). A conversation may wait
// for a process slot (a tool's command) while it holds its own; a process
// never waits for anything once started, so the two cannot deadlock.
// Thread-safe.
class DescriptorGate {
 public:
  // REQUIRES: slots >= 1.
  explicit DescriptorGate(size_t slots) : free_(slots), slots_(slots) {}
  DescriptorGate(const DescriptorGate&) = delete;
  DescriptorGate& operator=(const DescriptorGate&) = delete;

  // The process-wide gates, sized at first use from the soft RLIMIT_NOFILE
  // (after RaiseOpenFileLimit). A slot is one descriptor of conversations'.
  static DescriptorGate& Conversations();
  // A slot is one running child process.
  static DescriptorGate& Processes();
  // The number of slots of each gate for a descriptor limit of `limit`:
  // three quarters of (limit - kReservedDescriptors) descriptors for
  // conversations, a quarter for processes (kDescriptorsPerProcess each);
  // each at least 1, at most 1M.
  static size_t ConversationSlotsFor(uint64_t limit);
  static size_t ProcessSlotsFor(uint64_t limit);

  // Holds one slot until destroyed (or holds none, see Acquire).
  class Lease {
   public:
    Lease() = default;
    Lease(DescriptorGate* gate, size_t count) : gate_(gate), count_(count) {}
    ~Lease() {
      if (gate_) gate_->Release(count_);
    }
    Lease(Lease&& other) noexcept : gate_(other.gate_), count_(other.count_) {
      other.gate_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return gate_ != nullptr; }

   private:
    DescriptorGate* gate_ = nullptr;
    size_t count_ = 0;
  };

  // Blocks until `count` slots are free (at most all of them), or until
  // `cancel` fires: then the lease holds nothing and the caller carries on
  // into its own cancellation. Freed slots go to the waiters that fit, in
  // the order they came, each woken alone once its slots are set aside for
  // it: a slot freed wakes one waiter, not every one. A fiber parks while
  // it waits.
  Lease Acquire(const CancelToken& cancel, size_t count = 1);
  size_t slots() const { return slots_; }
  size_t in_use() const;
  size_t waiting() const;

 private:
  // A waiter, on its own stack, queued until granted or cancelled.
  struct Ticket {
    size_t count = 0;
    Waiter answer;  // kGranted or kCancelled.
    Ticket* prev = nullptr;
    Ticket* next = nullptr;
  };
  static constexpr int kGranted = 1;
  static constexpr int kCancelled = 2;

  void Release(size_t count);
  // Under mu_: takes `t` off the queue.
  void UnlinkLocked(Ticket* t);

  mutable std::mutex mu_;
  size_t free_;
  const size_t slots_;
  Ticket* head_ = nullptr;  // Under mu_: the oldest waiter.
  Ticket* tail_ = nullptr;
  size_t waiting_ = 0;
};

}  // namespace steps

#endif  // STEPS_PROCESS_LIMITS_H_
