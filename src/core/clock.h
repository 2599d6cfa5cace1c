// Time as the engine sees it. Everything that waits or reads the time goes
// through a Clock, so deadline, nudge and backoff tests run on a FakeClock,
// exactly and fast.
#ifndef STEPS_CORE_CLOCK_H_
#define STEPS_CORE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

#include "core/cancel.h"
#include "core/duration.h"
#include "core/fiber.h"

namespace steps {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time: deadlines are points on this line.
  virtual SteadyTime Now() const = 0;
  // Calendar time, for records and for Retry-After dates.
  virtual WallTime WallNow() const = 0;
  // Blocks until Now() >= until, or until `token` is cancelled.
  // Returns true when the time was reached, false when cancelled first.
  virtual bool SleepUntil(SteadyTime until, const CancelToken& token) = 0;

  bool SleepFor(Millis d, const CancelToken& token) {
    return SleepUntil(Now() + d, token);
  }
};

// The process-wide real clock. Its calendar time is the steady clock plus
// an offset, so the times one process records lie on one line with the
// durations it measures: a wall clock being slewed (chrony slews a freshly
// booted machine by up to 8%) cannot put a turn after the end of its step.
// A step of the system clock by more than WallAnchor::kMaxDrift is followed.
Clock& RealClock();

// The offset between the steady and the calendar clock, taken once and kept
// until the calendar clock has moved away from it by more than kMaxDrift.
// Thread-safe.
class WallAnchor {
 public:
  static constexpr std::chrono::milliseconds kMaxDrift{1000};

  // The calendar time for `steady`, given that the system clock reads
  // `system` at that instant.
  WallTime At(SteadyTime steady, WallTime system);

 private:
  // system - steady, in nanoseconds since each clock's epoch; kUnset until
  // the first call.
  static constexpr int64_t kUnset = INT64_MIN;
  std::atomic<int64_t> offset_ns_{kUnset};
};

// A clock that moves only when told to. Thread-safe.
// With auto_advance, a SleepUntil moves the time forward to its target at
// once (single-threaded tests of backoff schedules); without it, sleepers
// block until another thread calls Advance.
class FakeClock : public Clock {
 public:
  explicit FakeClock(bool auto_advance = false);

  SteadyTime Now() const override;
  WallTime WallNow() const override;
  bool SleepUntil(SteadyTime until, const CancelToken& token) override;

  void Advance(Millis d);
  // How long SleepUntil calls have slept in total (auto_advance mode), for
  // asserting on waits.
  Millis total_slept() const;
  // Number of threads currently inside SleepUntil.
  int sleepers() const;
  // Blocks (really) until at least `n` threads sleep on this clock, so a test
  // can advance time only once the code under test is waiting.
  void WaitForSleepers(int n) const;

 private:
  mutable std::mutex mu_;
  mutable FiberCondVar cv_;
  bool auto_advance_;
  SteadyTime now_;
  WallTime wall_start_;
  SteadyTime steady_start_;
  Millis total_slept_{0};
  int sleepers_ = 0;
};

// `t`, a time on `clock`, as a time on the real steady clock: as far from
// the real now as it is from `clock`'s. For waits that `clock` does not
// drive (a library's, the kernel's). With the real clock, `t` itself.
inline SteadyTime OnRealClock(const Clock& clock, SteadyTime t) {
  return std::chrono::steady_clock::now() + (t - clock.Now());
}

// An absolute point on the steady clock, or none ("no deadline").
class Deadline {
 public:
  Deadline() = default;  // None.
  static Deadline At(SteadyTime t) { return Deadline(t); }
  static Deadline After(const Clock& clock, Millis d) {
    return Deadline(clock.Now() + d);
  }
  static Deadline None() { return Deadline(); }

  bool is_set() const { return at_.has_value(); }
  // REQUIRES: is_set().
  SteadyTime at() const { return *at_; }
  // The point, or nullopt when there is no deadline.
  const std::optional<SteadyTime>& when() const { return at_; }
  bool Expired(const Clock& clock) const { return at_ && clock.Now() >= *at_; }
  // Time left (never negative), or nullopt when there is no deadline.
  std::optional<Millis> Remaining(const Clock& clock) const;
  // The earlier of the two (a missing deadline is the later one).
  Deadline Earlier(const Deadline& other) const;

 private:
  explicit Deadline(SteadyTime t) : at_(t) {}
  std::optional<SteadyTime> at_;
};

}  // namespace steps

#endif  // STEPS_CORE_CLOCK_H_
