#include "core/fiber.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <system_error>
#include <utility>

#include "core/fiber_context.h"

#ifdef STEPS_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace steps {
namespace fiber_internal {

// What a carrier does with a fiber that has switched back to it.
enum class Then { kDone, kPark, kParkUntil };

struct Fiber {
  FiberContext context;
  void* map = nullptr;
  char* stack = nullptr;  // Lowest address of the usable stack.
  size_t stack_bytes = 0;
  std::function<void()> fn;
  FiberPool* pool = nullptr;
  Then then = Then::kDone;
  Waiter* waiter = nullptr;
  SteadyPoint deadline;
  bool has_timer = false;
  std::multimap<SteadyPoint, FiberPool::Timer>::iterator timer;
  // AddressSanitizer's view of the switches: the fiber's fake stack, and
  // the stack it was resumed from (its carrier's).
  void* fake_stack = nullptr;
  const void* from_bottom = nullptr;
  size_t from_bytes = 0;
};

struct Carrier {
  FiberContext context;
  Fiber* running = nullptr;
  FiberPool* pool = nullptr;
  // Runs `f` until it finishes or parks.
  void Run(Fiber* f);
};

namespace {

thread_local Carrier* t_carrier = nullptr;

// Read anew at each call: a fiber that parked may resume on another
// carrier, and a TLS address kept in a register across the switch would
// name the old one.
__attribute__((noinline)) Carrier* CurrentCarrier() {
  asm volatile("" ::: "memory");
  return t_carrier;
}

Fiber* CurrentFiber() {
  Carrier* c = CurrentCarrier();
  return c ? c->running : nullptr;
}

void StartSwitch(void** fake_stack, const void* bottom, size_t bytes) {
#ifdef STEPS_FIBER_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, bytes);
#else
  (void)fake_stack;
  (void)bottom;
  (void)bytes;
#endif
}

void FinishSwitch(void* fake_stack, const void** bottom, size_t* bytes) {
#ifdef STEPS_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom, bytes);
#else
  (void)fake_stack;
  (void)bottom;
  (void)bytes;
#endif
}

// From a fiber to its carrier; returns when the fiber is resumed.
void SwitchOut(Fiber* f) {
  Carrier* c = CurrentCarrier();
  StartSwitch(&f->fake_stack, f->from_bottom, f->from_bytes);
  SwitchFiberContext(f->context, c->context);
  FinishSwitch(f->fake_stack, &f->from_bottom, &f->from_bytes);
}

void Trampoline() {
  Fiber* f = CurrentFiber();
  FinishSwitch(nullptr, &f->from_bottom, &f->from_bytes);
  // An exception out of a fiber ends the process, as out of a thread.
  [&]() noexcept { f->fn(); }();
  f->fn = nullptr;  // Its captures go while still on the fiber.
  f->then = Then::kDone;
  StartSwitch(nullptr, f->from_bottom, f->from_bytes);
  // For good: the context saved here is never resumed.
  SwitchFiberContext(f->context, CurrentCarrier()->context);
}

long Futex(std::atomic<int>* word, int op, int value,
           const struct timespec* timeout, uint32_t mask) {
  return syscall(SYS_futex, reinterpret_cast<int*>(word), op, value, timeout,
                 nullptr, mask);
}

}  // namespace

void Carrier::Run(Fiber* f) {
  while (true) {
    running = f;
    void* fake = nullptr;
    StartSwitch(&fake, f->stack, f->stack_bytes);
    SwitchFiberContext(context, f->context);
    FinishSwitch(fake, nullptr, nullptr);
    running = nullptr;
    switch (f->then) {
      case Then::kDone:
        pool->Finished(f);
        return;
      case Then::kPark: {
        int expected = 0;
        if (f->waiter->state_.compare_exchange_strong(
                expected, Waiter::kParked, std::memory_order_acq_rel)) {
          return;  // Give readies it.
        }
        continue;  // Given while switching out: straight back in.
      }
      case Then::kParkUntil: {
        // Under the pool's lock, so that a Give's Ready (which takes it)
        // finds the timer in place for the fiber to cancel.
        std::lock_guard<std::mutex> lock(pool->mu_);
        int expected = 0;
        if (f->waiter->state_.compare_exchange_strong(
                expected, Waiter::kParked, std::memory_order_acq_rel)) {
          f->timer = pool->timers_.emplace(f->deadline,
                                           FiberPool::Timer{f->waiter, f});
          f->has_timer = true;
          return;
        }
        break;  // Given while switching out: straight back in.
      }
    }
  }
}

}  // namespace fiber_internal

using fiber_internal::Carrier;
using fiber_internal::CurrentCarrier;
using fiber_internal::CurrentFiber;
using fiber_internal::Fiber;
using fiber_internal::Then;

bool OnFiber() { return CurrentFiber() != nullptr; }

// Waiter

int Waiter::Peek() const {
  const int v = state_.load(std::memory_order_acquire);
  return v > 0 ? v : 0;
}

int Waiter::Wait() {
  if (Fiber* f = CurrentFiber()) {
    while (true) {
      if (int v = Peek()) return v;
      fiber_ = f;
      f->waiter = this;
      f->then = Then::kPark;
      fiber_internal::SwitchOut(f);
    }
  }
  return WaitOnThread(nullptr);
}

int Waiter::WaitUntil(SteadyPoint deadline) {
  if (Fiber* f = CurrentFiber()) {
    if (int v = Peek()) return v;
    if (std::chrono::steady_clock::now() >= deadline) return 0;
    fiber_ = f;
    f->waiter = this;
    f->deadline = deadline;
    f->then = Then::kParkUntil;
    fiber_internal::SwitchOut(f);
    // Resumed by Give or by the timer (which took itself out of the pool).
    FiberPool* pool = f->pool;
    std::lock_guard<std::mutex> lock(pool->mu_);
    if (f->has_timer) {
      pool->timers_.erase(f->timer);
      f->has_timer = false;
    }
    return Peek();
  }
  const auto since_epoch = deadline.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  struct timespec at;
  at.tv_sec = static_cast<time_t>(secs.count());
  at.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - secs)
          .count());
  return WaitOnThread(&at);
}

int Waiter::WaitOnThread(const struct timespec* until) {
  while (true) {
    int v = state_.load(std::memory_order_acquire);
    if (v > 0) return v;
    if (v == 0 && !state_.compare_exchange_weak(v, kThreadWaits,
                                                std::memory_order_acq_rel)) {
      continue;
    }
    // An absolute CLOCK_MONOTONIC time, the steady clock's; none waits for
    // ever.
    const long rc =
        fiber_internal::Futex(&state_, FUTEX_WAIT_BITSET_PRIVATE, kThreadWaits,
                              until, FUTEX_BITSET_MATCH_ANY);
    if (rc != 0 && errno == ETIMEDOUT) {
      int waiting = kThreadWaits;
      if (state_.compare_exchange_strong(waiting, 0,
                                         std::memory_order_acq_rel)) {
        return 0;
      }
    }
  }
}

void Waiter::Give(int value) {
  const int old = state_.exchange(value, std::memory_order_acq_rel);
  if (old == kParked) {
    Fiber* f = fiber_;  // Parked: it cannot return before this Ready.
    f->pool->Ready(f);
  } else if (old == kThreadWaits) {
    // Only the address is used: a wake where nobody waits wakes nobody.
    fiber_internal::Futex(&state_, FUTEX_WAKE_PRIVATE, 1, nullptr, 0);
  }
}

// FiberCondVar

void FiberCondVar::Link(Node& n) {
  std::lock_guard<std::mutex> lock(mu_);
  n.prev = tail_;
  n.next = nullptr;
  if (tail_) {
    tail_->next = &n;
  } else {
    head_ = &n;
  }
  tail_ = &n;
  n.linked = true;
}

bool FiberCondVar::Unlink(Node& n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!n.linked) return false;
  (n.prev ? n.prev->next : head_) = n.next;
  (n.next ? n.next->prev : tail_) = n.prev;
  n.linked = false;
  return true;
}

void FiberCondVar::Wait(std::unique_lock<std::mutex>& lock) {
  Node n;
  Link(n);
  lock.unlock();
  n.waiter.Wait();
  lock.lock();
}

bool FiberCondVar::WaitUntil(std::unique_lock<std::mutex>& lock,
                             SteadyPoint deadline) {
  Node n;
  Link(n);
  lock.unlock();
  bool notified = n.waiter.WaitUntil(deadline) != 0;
  if (!notified && !Unlink(n)) {
    // A notify took it off the list: its Give is on the way, and must
    // find the node alive.
    n.waiter.Wait();
    notified = true;
  }
  lock.lock();
  return notified;
}

void FiberCondVar::NotifyOne() {
  Node* n = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = head_;
    if (!n) return;
    head_ = n->next;
    (head_ ? head_->prev : tail_) = nullptr;
    n->linked = false;
  }
  n->waiter.Give(1);
}

void FiberCondVar::NotifyAll() {
  Node* n = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = head_;
    for (Node* m = head_; m; m = m->next) m->linked = false;
    head_ = tail_ = nullptr;
  }
  while (n) {
    Node* next = n->next;  // Read before the Give lets it go.
    n->waiter.Give(1);
    n = next;
  }
}

// Free functions

void SleepUntil(SteadyPoint deadline) {
  if (OnFiber()) {
    Waiter never_given;
    while (never_given.WaitUntil(deadline) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
    }
    return;
  }
  std::this_thread::sleep_until(deadline);
}

void RunOnThread(const std::function<void()>& fn) {
  if (!OnFiber()) {
    fn();
    return;
  }
  Waiter done;
  bool started = true;
  try {
    // Give is the thread's last touch of this frame.
    std::thread([&] {
      fn();
      done.Give(1);
    }).detach();
  } catch (const std::system_error&) {
    started = false;
  }
  if (!started) {
    // No thread to be had (the process's or the user's limit): the carrier
    // runs it, and the pool's watcher gives the others a carrier meanwhile.
    // Outside the handler: `fn` may park and resume on another carrier,
    // and the exception being handled belongs to this thread's runtime.
    fn();
    return;
  }
  done.Wait();
}

FiberPool& SharedFiberPool() {
  static FiberPool* pool = [] {
    FiberPool::Options options;
    options.carriers =
        std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    options.stack_bytes = size_t{8} << 20;
    return new FiberPool(options);
  }();
  return *pool;
}

// FiberPool

FiberPool::FiberPool() : FiberPool(Options()) {}

namespace {

// How many of the threads `tids` (of this process) are runnable: running
// or waiting for a CPU, as opposed to sleeping in the kernel. A thread
// whose state cannot be read counts as not runnable.
int CountRunnable(const std::vector<int>& tids) {
  int runnable = 0;
  for (const int tid : tids) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "tid (comm) S ...": the command may hold spaces and parentheses.
    const char* close_paren = std::strrchr(buf, ')');
    if (close_paren != nullptr && close_paren[1] == ' ' &&
        close_paren[2] == 'R') {
      ++runnable;
    }
  }
  return runnable;
}

size_t PageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t WholePages(size_t bytes) {
  const size_t page = PageBytes();
  return (bytes + page - 1) / page * page;
}

}  // namespace

FiberPool::FiberPool(Options options)
    : options_(options),
      stack_bytes_(WholePages(options.stack_bytes)),
      map_bytes_(stack_bytes_ + PageBytes()) {
  const int n = options_.carriers > 0 ? options_.carriers : 1;
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] { CarrierLoop(/*extra=*/false); });
  }
  if (options_.stuck_after.count() > 0) watcher_ = std::thread([this] { Watch(); });
}

FiberPool::~FiberPool() {
  Join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  watch_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  if (watcher_.joinable()) watcher_.join();
  {
    std::unique_lock<std::mutex> lock(mu_);
    extras_cv_.wait(lock, [this] { return extras_ == 0; });
  }
  for (void* map : spare_stacks_) munmap(map, map_bytes_);
}

bool FiberPool::Spawn(std::function<void()> fn) {
  void* map = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_stacks_.empty()) {
      map = spare_stacks_.back();
      spare_stacks_.pop_back();
    }
  }
  if (!map) {
    map = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (map == MAP_FAILED) return false;
    // The lowest page is a guard: an overflow faults instead of writing
    // over whatever lies below.
    if (mprotect(map, map_bytes_ - stack_bytes_, PROT_NONE) != 0) {
      munmap(map, map_bytes_);
      return false;
    }
#ifdef MADV_POPULATE_WRITE
    // The stack's top pages, which every fiber uses, made at once: one
    // system call instead of a fault for each (dear on a virtual machine).
    // A kernel without it (before 5.14) faults them in as they are used.
    const size_t top = std::min<size_t>(stack_bytes_, 16 * 1024);
    madvise(static_cast<char*>(map) + map_bytes_ - top, top,
            MADV_POPULATE_WRITE);
#endif
    std::lock_guard<std::mutex> lock(mu_);
    ++stacks_mapped_;
  }
  auto* f = new Fiber;
  f->map = map;
  f->stack = static_cast<char*>(map) + (map_bytes_ - stack_bytes_);
  f->stack_bytes = stack_bytes_;
  f->fn = std::move(fn);
  f->pool = this;
  fiber_internal::MakeFiberContext(f->context, f->stack, f->stack_bytes,
                                   &fiber_internal::Trampoline);
  std::lock_guard<std::mutex> lock(mu_);
  ++live_;
  ReadyLocked(f);
  return true;
}

void FiberPool::Join() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return live_ == 0; });
}

size_t FiberPool::stacks_mapped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stacks_mapped_;
}

int FiberPool::carriers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size()) + extras_;
}

size_t FiberPool::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

void FiberPool::Ready(Fiber* f) {
  std::lock_guard<std::mutex> lock(mu_);
  ReadyLocked(f);
}

void FiberPool::ReadyLocked(Fiber* f, bool carrier_takes_next) {
  ready_.push_back(f);
  if (idle_ > 0) {
    work_cv_.notify_one();
  } else if (!carrier_takes_next) {
    WakeWatcherLocked();
  }
}

void FiberPool::WakeWatcherLocked() {
  if (watcher_parked_ && !ready_.empty() && idle_ == 0) {
    watcher_parked_ = false;
    watch_cv_.notify_one();
  }
}

void FiberPool::Finished(Fiber* f) {
  void* map = f->map;
  delete f;
  std::lock_guard<std::mutex> lock(mu_);
  // Kept mapped, guard and touched pages as they are: the next fiber takes
  // it without a system call or a page fault.
  spare_stacks_.push_back(map);
  if (--live_ == 0) done_cv_.notify_all();
}

SteadyPoint FiberPool::FireTimers(SteadyPoint now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto it = timers_.begin();
    Timer t = it->second;
    timers_.erase(it);
    t.fiber->has_timer = false;
    int parked = Waiter::kParked;
    // Not parked any more: a Give came first and readies it.
    if (t.waiter->state_.compare_exchange_strong(parked, 0,
                                                 std::memory_order_acq_rel)) {
      // The carrier firing it takes a ready fiber next, and wakes the
      // watcher then if others are left waiting.
      ReadyLocked(t.fiber, /*carrier_takes_next=*/true);
    }
  }
  return timers_.empty() ? SteadyPoint::max() : timers_.begin()->first;
}

void FiberPool::CarrierLoop(bool extra) {
  // How long an extra carrier stays with nothing to do.
  constexpr std::chrono::seconds kExtraIdle{1};
  Carrier carrier;
  carrier.pool = this;
  fiber_internal::t_carrier = &carrier;
  const int tid = static_cast<int>(syscall(SYS_gettid));
  // Its own name: an extra carrier, started by the watcher, would otherwise
  // take the watcher's.
  pthread_setname_np(pthread_self(), kCarrierThreadName);
  std::unique_lock<std::mutex> lock(mu_);
  carrier_tids_.push_back(tid);
  while (true) {
    const SteadyPoint now = std::chrono::steady_clock::now();
    const SteadyPoint next = FireTimers(now);
    if (!ready_.empty()) {
      Fiber* f = ready_.front();
      ready_.pop_front();
      ++taken_;
      WakeWatcherLocked();  // More wait, and this was the last idle carrier.
      lock.unlock();
      carrier.Run(f);
      lock.lock();
      continue;
    }
    if (stopping_) break;
    ++idle_;
    if (extra) {
      const SteadyPoint give_up = now + kExtraIdle;
      const bool work = work_cv_.wait_until(lock, std::min(next, give_up)) ==
                        std::cv_status::no_timeout;
      --idle_;
      if (!work && ready_.empty() && next > give_up &&
          std::chrono::steady_clock::now() >= give_up) {
        break;
      }
      continue;
    }
    if (next == SteadyPoint::max()) {
      work_cv_.wait(lock);
    } else {
      work_cv_.wait_until(lock, next);
    }
    --idle_;
  }
  carrier_tids_.erase(
      std::find(carrier_tids_.begin(), carrier_tids_.end(), tid));
  fiber_internal::t_carrier = nullptr;
  if (extra) {
    // Notified under the lock: the destructor cannot go before this
    // thread is done with the pool.
    --extras_;
    extras_cv_.notify_all();
  }
}

void FiberPool::StartExtraCarrier() {
  try {
    std::thread([this] { CarrierLoop(/*extra=*/true); }).detach();
    ++extras_;  // Under the lock, before the new carrier can end.
  } catch (const std::system_error&) {
    // No thread to be had now: the next look tries again.
  }
}

void FiberPool::Watch() {
  pthread_setname_np(pthread_self(), kWatcherThreadName);
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t seen = taken_;
  while (!stopping_) {
    // No fiber waits for a carrier, or one is idle: nothing can be stuck
    // until that changes (WakeWatcherLocked), so no looks meanwhile: an
    // idle pool, or one whose fibers all wait for I/O, wakes nobody.
    if (ready_.empty() || idle_ > 0) {
      watcher_parked_ = true;
      watch_cv_.wait(lock, [this] { return stopping_ || !watcher_parked_; });
      watcher_parked_ = false;
      seen = taken_;
      continue;
    }
    watch_cv_.wait_for(lock, options_.stuck_after);
    if (stopping_) break;
    // Fibers wait, no carrier is free, none has taken a fiber since the
    // last look, and some carrier is not runnable: it is blocked in the
    // kernel, and its CPU is free for another carrier. (When every one
    // is runnable, busy or preempted, another thread adds no CPU.)
    const auto stuck = [&] {
      return !stopping_ && !ready_.empty() && idle_ == 0 && taken_ == seen &&
             extras_ < options_.max_extra_carriers;
    };
    if (stuck()) {
      // A carrier not registered yet has not waited for anything: it
      // counts as runnable.
      const std::vector<int> tids = carrier_tids_;
      const int carriers = static_cast<int>(threads_.size()) + extras_;
      const int unregistered =
          std::max(0, carriers - static_cast<int>(tids.size()));
      lock.unlock();
      const int runnable = CountRunnable(tids) + unregistered;
      lock.lock();
      if (runnable < carriers && stuck()) StartExtraCarrier();
    }
    seen = taken_;
  }
}

}  // namespace steps
