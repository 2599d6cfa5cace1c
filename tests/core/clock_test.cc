#include "core/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace steps {
namespace {

TEST(FakeClockTest, AutoAdvanceSleepsInstantlyAndCounts) {
  FakeClock clock(/*auto_advance=*/true);
  CancelToken token;
  SteadyTime start = clock.Now();
  EXPECT_TRUE(clock.SleepFor(Millis(200), token));
  EXPECT_TRUE(clock.SleepFor(Millis(400), token));
  EXPECT_EQ(clock.Now() - start, Millis(600));
  EXPECT_EQ(clock.total_slept(), Millis(600));
}

TEST(FakeClockTest, SleeperWakesOnlyWhenAdvancedFarEnough) {
  FakeClock clock;
  CancelToken token;
  bool reached = false;
  std::thread sleeper([&] { reached = clock.SleepFor(Millis(1000), token); });
  clock.WaitForSleepers(1);
  clock.Advance(Millis(999));
  EXPECT_EQ(clock.sleepers(), 1);
  clock.Advance(Millis(1));
  sleeper.join();
  EXPECT_TRUE(reached);
}

TEST(FakeClockTest, CancelWakesSleeper) {
  FakeClock clock;
  CancelToken token;
  bool reached = true;
  std::thread sleeper([&] { reached = clock.SleepFor(Millis(1000), token); });
  clock.WaitForSleepers(1);
  token.Cancel(CancelReason::kAbort);
  sleeper.join();
  EXPECT_FALSE(reached);
}

TEST(DeadlineTest, RemainingAndExpiry) {
  FakeClock clock;
  Deadline none;
  EXPECT_FALSE(none.is_set());
  EXPECT_FALSE(none.Remaining(clock).has_value());
  EXPECT_FALSE(none.Expired(clock));
  Deadline d = Deadline::After(clock, Millis(1000));
  EXPECT_EQ(*d.Remaining(clock), Millis(1000));
  clock.Advance(Millis(999));
  EXPECT_FALSE(d.Expired(clock));
  clock.Advance(Millis(1));
  EXPECT_TRUE(d.Expired(clock)) << "expired exactly at the deadline";
  clock.Advance(Millis(5));
  EXPECT_EQ(*d.Remaining(clock), Millis(0)) << "never negative";
}

TEST(DeadlineTest, EarlierPicksTheNearestAndTreatsNoneAsLatest) {
  FakeClock clock;
  Deadline a = Deadline::After(clock, Millis(10));
  Deadline b = Deadline::After(clock, Millis(20));
  EXPECT_EQ(a.Earlier(b).at(), a.at());
  EXPECT_EQ(b.Earlier(a).at(), a.at());
  EXPECT_EQ(Deadline().Earlier(b).at(), b.at());
  EXPECT_EQ(b.Earlier(Deadline()).at(), b.at());
  EXPECT_FALSE(Deadline().Earlier(Deadline()).is_set());
}

TEST(RealClockTest, SleepIsCutByCancel) {
  CancelToken token;
  token.Cancel(CancelReason::kAbort);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(RealClock().SleepFor(Millis(60000), token));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Points `ms` after a fixed calendar and steady origin.
WallTime Wall(int64_t ms) {
  return WallTime() + std::chrono::hours(24 * 365 * 56) +
         std::chrono::milliseconds(ms);
}
SteadyTime Steady(int64_t ms) {
  return SteadyTime() + std::chrono::hours(1000) +
         std::chrono::milliseconds(ms);
}

TEST(WallAnchorTest, ASlewedSystemClockDoesNotMoveRecordedTimes) {
  WallAnchor anchor;
  EXPECT_EQ(anchor.At(Steady(0), Wall(0)), Wall(0)) << "the first reading";
  // Three seconds later the system clock, being slewed, reads 15 ms ahead:
  // the calendar time stays three seconds after the first.
  EXPECT_EQ(anchor.At(Steady(3000), Wall(3015)), Wall(3000));
  EXPECT_EQ(anchor.At(Steady(6000), Wall(5990)), Wall(6000));
  // Exactly the largest drift kept, either way.
  EXPECT_EQ(anchor.At(Steady(7000), Wall(8000)), Wall(7000));
  EXPECT_EQ(anchor.At(Steady(7000), Wall(6000)), Wall(7000));
}

TEST(WallAnchorTest, AStepOfTheSystemClockIsFollowed) {
  WallAnchor anchor;
  anchor.At(Steady(0), Wall(0));
  // One millisecond past the drift kept: the clock was set; follow it and
  // keep the new offset from then on.
  EXPECT_EQ(anchor.At(Steady(1000), Wall(2001)), Wall(2001));
  EXPECT_EQ(anchor.At(Steady(2000), Wall(3005)), Wall(3001));
  EXPECT_EQ(anchor.At(Steady(3000), Wall(1000)), Wall(1000)) << "backwards";
  EXPECT_EQ(anchor.At(Steady(4000), Wall(2000)), Wall(2000));
}

TEST(RealClockTest, CalendarTimeAdvancesWithTheSteadyClock) {
  Clock& clock = RealClock();
  const SteadyTime s0 = clock.Now();
  const WallTime w0 = clock.WallNow();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const WallTime w1 = clock.WallNow();
  const SteadyTime s1 = clock.Now();
  // Unless the system clock was set meanwhile, the calendar interval lies
  // within the steady one taken around it.
  EXPECT_LE(w1 - w0, s1 - s0);
  EXPECT_GE(w1 - w0, std::chrono::milliseconds(20));
  const auto off = std::chrono::system_clock::now() - clock.WallNow();
  EXPECT_LT(std::chrono::abs(off),
            WallAnchor::kMaxDrift + std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace steps
