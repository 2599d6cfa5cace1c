#include "core/clock.h"

namespace steps {
namespace {

class SystemClock : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override {
    return anchor_.At(std::chrono::steady_clock::now(),
                      std::chrono::system_clock::now());
  }
  bool SleepUntil(SteadyTime until, const CancelToken& token) override {
    return token.WaitUntil(until);
  }

 private:
  mutable WallAnchor anchor_;
};

int64_t Ns(std::chrono::nanoseconds d) { return d.count(); }

}  // namespace

WallTime WallAnchor::At(SteadyTime steady, WallTime system) {
  using std::chrono::nanoseconds;
  const int64_t steady_ns = Ns(steady.time_since_epoch());
  const int64_t system_ns =
      Ns(std::chrono::duration_cast<nanoseconds>(system.time_since_epoch()));
  int64_t offset = offset_ns_.load(std::memory_order_relaxed);
  if (offset != kUnset) {
    const int64_t drift = system_ns - (steady_ns + offset);
    const int64_t max = Ns(nanoseconds(kMaxDrift));
    if (drift <= max && drift >= -max) {
      return WallTime(std::chrono::duration_cast<WallTime::duration>(
          nanoseconds(steady_ns + offset)));
    }
  }
  // First reading, or the system clock was stepped: follow it.
  offset_ns_.store(system_ns - steady_ns, std::memory_order_relaxed);
  return system;
}

Clock& RealClock() {
  static SystemClock clock;
  return clock;
}

FakeClock::FakeClock(bool auto_advance)
    : auto_advance_(auto_advance),
      // A fixed, recognisable origin far from zero.
      now_(SteadyTime() + std::chrono::hours(1000)),
      wall_start_(WallTime() + std::chrono::hours(24 * 365 * 56)),
      steady_start_(now_) {}

SteadyTime FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

WallTime FakeClock::WallNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_start_ +
         std::chrono::duration_cast<WallTime::duration>(now_ - steady_start_);
}

bool FakeClock::SleepUntil(SteadyTime until, const CancelToken& token) {
  std::unique_lock<std::mutex> lock(mu_);
  if (token.cancelled()) return false;
  if (auto_advance_) {
    if (until > now_) {
      total_slept_ += std::chrono::duration_cast<Millis>(until - now_);
      now_ = until;
    }
    return true;
  }
  ++sleepers_;
  cv_.NotifyAll();
  // Wake on Advance or on cancellation.
  uint64_t id = 0;
  lock.unlock();
  id = token.OnCancel([this] {
    std::lock_guard<std::mutex> l(mu_);
    cv_.NotifyAll();
  });
  lock.lock();
  cv_.Wait(lock, [&] { return now_ >= until || token.cancelled(); });
  --sleepers_;
  bool reached = now_ >= until && !token.cancelled();
  lock.unlock();
  token.RemoveCallback(id);
  return reached;
}

void FakeClock::Advance(Millis d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }
  cv_.NotifyAll();
}

Millis FakeClock::total_slept() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_slept_;
}

int FakeClock::sleepers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleepers_;
}

void FakeClock::WaitForSleepers(int n) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.Wait(lock, [&] { return sleepers_ >= n; });
}

std::optional<Millis> Deadline::Remaining(const Clock& clock) const {
  if (!at_) return std::nullopt;
  auto left = *at_ - clock.Now();
  if (left <= SteadyTime::duration::zero()) return Millis(0);
  return std::chrono::ceil<Millis>(left);
}

Deadline Deadline::Earlier(const Deadline& other) const {
  if (!at_) return other;
  if (!other.at_) return *this;
  return *at_ <= *other.at_ ? *this : other;
}

}  // namespace steps
