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

}  // namespace
}  // namespace steps
