#include "core/clock.h"

namespace steps {
namespace {

class SystemClock : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  bool SleepUntil(SteadyTime until, const CancelToken& token) override {
    return token.WaitUntil(until);
  }
};

}  // namespace

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
  cv_.notify_all();
  // Wake on Advance or on cancellation.
  uint64_t id = 0;
  lock.unlock();
  id = token.OnCancel([this] {
    std::lock_guard<std::mutex> l(mu_);
    cv_.notify_all();
  });
  lock.lock();
  cv_.wait(lock, [&] { return now_ >= until || token.cancelled(); });
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
  cv_.notify_all();
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
  cv_.wait(lock, [&] { return sleepers_ >= n; });
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
