// Fibers: thousands of waits on a few threads.
//
// A FiberPool runs functions as fibers, each on a stack of its own (mapped
// lazily: only the pages a fiber touches cost memory), on a fixed number of
// carrier threads. A fiber blocks only through the waits of this header
// (Waiter, FiberCondVar, SleepUntil, RunOnThread), which park it and let
// its carrier run another fiber; anything else that blocks (a system call
// that waits, a mutex held for long) blocks its carrier and belongs in
// RunOnThread. The same waits work on plain threads (a futex), so code
// written against them runs either way.
//
// A fiber may resume on another carrier than the one it parked on: what is
// thread_local is the carrier's, not the fiber's.
//
// A fiber that blocks its carrier anyway slows the others but never stops
// them: when fibers are ready, no carrier has taken one for a while
// (Options::stuck_after) and some carrier is not runnable (it waits in the
// kernel), the pool starts another carrier (up to
// Options::max_extra_carriers), which ends again once it has had nothing
// to do for a second. Carriers that are all merely busy or preempted (a
// saturated machine) get no other: one more thread would add no CPU.
#ifndef STEPS_CORE_FIBER_H_
#define STEPS_CORE_FIBER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace steps {

namespace fiber_internal {
struct Fiber;
struct Carrier;
}  // namespace fiber_internal

using SteadyPoint = std::chrono::steady_clock::time_point;

// True while the calling code runs on a fiber.
bool OnFiber();

// One waiter, one value. Wait blocks (parks the fiber, or puts the thread
// to sleep on a futex) until Give.
class Waiter {
 public:
  Waiter() = default;
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // Blocks until Give; returns the value given.
  int Wait();
  // Blocks until Give or `deadline` (steady clock); returns the value
  // given, or 0 when the deadline came first. A Give may still come after
  // a timeout (Wait then returns it).
  int WaitUntil(SteadyPoint deadline);
  // The value given so far; 0 before Give.
  int Peek() const;
  // Gives `value` (> 0) and wakes the waiter, which may destroy the Waiter
  // as soon as it has returned: Give touches nothing of it after the wake.
  // At most one Give per Waiter, unless Reset between them.
  void Give(int value);
  // Makes the waiter new again (Peek 0, Wait blocks), to be given once
  // more. REQUIRES: nobody waits, and no Give comes until the reset is seen
  // (the giver and the resetter share a lock). A thread's wake left over
  // from the last Give may still come; Wait sleeps again on it.
  void Reset() { state_.store(0, std::memory_order_relaxed); }

 private:
  friend struct fiber_internal::Carrier;
  friend class FiberPool;
  // A plain thread's wait, until `until` (absolute, the steady clock's) or
  // for ever when it is null; 0 when it came first.
  int WaitOnThread(const struct timespec* until);
  // state_: 0, a value given (> 0), or one of these.
  static constexpr int kThreadWaits = -1;  // A thread sleeps on the futex.
  static constexpr int kParked = -2;       // A fiber is parked on it.
  std::atomic<int> state_{0};
  fiber_internal::Fiber* fiber_ = nullptr;  // The fiber that waits.
};

// A condition variable whose waits park a fiber instead of blocking its
// carrier; on a plain thread it behaves as std::condition_variable. As
// there, a wait may return without a notify: callers wait in a loop on
// their condition.
class FiberCondVar {
 public:
  FiberCondVar() = default;
  FiberCondVar(const FiberCondVar&) = delete;
  FiberCondVar& operator=(const FiberCondVar&) = delete;

  void Wait(std::unique_lock<std::mutex>& lock);
  template <typename Pred>
  void Wait(std::unique_lock<std::mutex>& lock, Pred pred) {
    while (!pred()) Wait(lock);
  }
  // False when `deadline` came first.
  bool WaitUntil(std::unique_lock<std::mutex>& lock, SteadyPoint deadline);
  template <typename Pred>
  bool WaitUntil(std::unique_lock<std::mutex>& lock, SteadyPoint deadline,
                 Pred pred) {
    while (!pred()) {
      if (!WaitUntil(lock, deadline)) return pred();
    }
    return true;
  }
  void NotifyOne();
  void NotifyAll();

 private:
  struct Node {
    Waiter waiter;
    Node* prev = nullptr;
    Node* next = nullptr;
    bool linked = false;
  };
  void Link(Node& n);
  // True when `n` was still waiting (and is no longer).
  bool Unlink(Node& n);
  std::mutex mu_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
};

// Sleeps until `deadline`: parks a fiber, or sleeps the thread.
void SleepUntil(SteadyPoint deadline);

// Runs `fn` on a thread of its own and waits for it (parking a fiber); on a
// plain thread, runs it there. For what blocks in the kernel: a child
// process's pipes, a blocking read.
void RunOnThread(const std::function<void()>& fn);

// Runs `fn` and returns what it returns: on a thread of its own when
// called on a fiber (RunOnThread), here otherwise. For work that blocks in
// the kernel or holds a mutex while it waits.
template <typename Fn>
auto OffFiber(Fn&& fn) -> decltype(fn()) {
  if (!OnFiber()) return fn();
  std::optional<decltype(fn())> out;
  RunOnThread([&] { out.emplace(fn()); });
  return std::move(*out);
}

// The names of a pool's threads (as `top -H` and /proc show them).
inline constexpr char kWatcherThreadName[] = "steps-watcher";
inline constexpr char kCarrierThreadName[] = "steps-carrier";

class FiberPool {
 public:
  struct Options {
    int carriers = 2;
    // Virtual size of each fiber's stack (plus a guard page); pages are
    // committed as touched.
    size_t stack_bytes = size_t{1} << 20;
    // Ready fibers left waiting this long, with some carrier blocked in
    // the kernel, start one more carrier; zero never does.
    std::chrono::milliseconds stuck_after{5};
    // At most this many carriers beyond `carriers` at once: when they too
    // all wait on one lock (a terminal that does not read its output),
    // more would only add threads.
    int max_extra_carriers = 64;
  };
  FiberPool();
  explicit FiberPool(Options options);
  ~FiberPool();  // Waits for every fiber, then stops the carriers.
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;

  // Runs `fn` on a fiber. False (and `fn` not run) when its stack could
  // not be mapped.
  bool Spawn(std::function<void()> fn);
  // Blocks until every fiber spawned so far has finished.
  void Join();
  // Fibers spawned and not finished.
  size_t live() const;
  // Carriers running now: those the pool started with, and the ones
  // started since for stuck carriers that have not ended yet.
  int carriers() const;
  // Stacks mapped so far: at most as many as fibers were ever live at once.
  size_t stacks_mapped() const;

 private:
  friend struct fiber_internal::Carrier;
  friend struct fiber_internal::Fiber;
  friend class Waiter;
  struct Timer {
    Waiter* waiter;
    fiber_internal::Fiber* fiber;
  };
  // `extra`: started for stuck carriers; ends after a second idle.
  void CarrierLoop(bool extra);
  // Watches for stuck carriers while fibers are live.
  void Watch();
  // REQUIRES: mu_ held.
  void StartExtraCarrier();
  // REQUIRES: mu_ held. Readies the fibers whose timers are due; returns
  // when the next one is.
  SteadyPoint FireTimers(SteadyPoint now);
  void Ready(fiber_internal::Fiber* f);
  // Queues `f` to run. `carrier_takes_next`: the caller is a carrier that
  // takes a ready fiber right after (and wakes the watcher then).
  void ReadyLocked(fiber_internal::Fiber* f, bool carrier_takes_next = false);
  // Wakes the parked watcher when a fiber waits and no carrier is idle.
  void WakeWatcherLocked();
  void Finished(fiber_internal::Fiber* f);

  const Options options_;
  // A fiber's stack, rounded up to whole pages, and its mapping (the stack
  // and a guard page below it).
  const size_t stack_bytes_;
  const size_t map_bytes_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // Carriers wait here for work.
  std::condition_variable done_cv_;  // Join waits here.
  std::deque<fiber_internal::Fiber*> ready_;
  std::multimap<SteadyPoint, Timer> timers_;
  size_t live_ = 0;
  int idle_ = 0;
  bool stopping_ = false;
  uint64_t taken_ = 0;  // Times a carrier took a ready fiber.
  int extras_ = 0;      // Extra carriers running (detached).
  std::vector<int> carrier_tids_;  // Kernel thread ids of the carriers.
  // The watcher: a fiber waits for a carrier and none is idle (only then
  // can the pool be stuck).
  std::condition_variable watch_cv_;
  bool watcher_parked_ = false;  // It waits on watch_cv_ with no time limit.
  std::condition_variable extras_cv_;  // The destructor: an extra ended.
  // Stacks of finished fibers, kept for the next ones until the pool goes
  // (as many as were ever in use at once): unmapping one costs every other
  // thread's TLB a flush.
  std::vector<void*> spare_stacks_;
  size_t stacks_mapped_ = 0;
  std::vector<std::thread> threads_;
  std::thread watcher_;
};

// The process's own pool, made at the first call and never destroyed: as
// many carriers as the machine has cores (at least two), stacks as large
// as a thread's (8 MiB, committed as touched).
FiberPool& SharedFiberPool();

}  // namespace steps

#endif  // STEPS_CORE_FIBER_H_
