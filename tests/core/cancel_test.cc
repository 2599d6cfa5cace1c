#include "core/cancel.h"

#include <gtest/gtest.h>

#include <thread>

namespace steps {
namespace {

TEST(CancelTest, ParentCancelsDescendantsNotTheReverse) {
  CancelToken run;
  CancelToken job = run.Child();
  CancelToken step = job.Child();
  CancelToken sibling = run.Child();
  step.Cancel(CancelReason::kDeadline);
  EXPECT_TRUE(step.cancelled());
  EXPECT_FALSE(job.cancelled());
  EXPECT_FALSE(run.cancelled());
  run.Cancel(CancelReason::kAbort);
  EXPECT_TRUE(job.cancelled());
  EXPECT_TRUE(sibling.cancelled());
  EXPECT_EQ(run.reason(), CancelReason::kAbort);
  EXPECT_EQ(job.reason(), CancelReason::kParent);
  EXPECT_EQ(step.reason(), CancelReason::kDeadline) << "first reason wins";
}

TEST(CancelTest, ChildOfCancelledIsBornCancelled) {
  CancelToken run;
  run.Cancel(CancelReason::kAbort);
  EXPECT_TRUE(run.Child().cancelled());
}

TEST(CancelTest, CallbacksRunOnceAndCanBeRemoved) {
  CancelToken t;
  int fired = 0, removed = 0;
  t.OnCancel([&] { ++fired; });
  uint64_t id = t.OnCancel([&] { ++removed; });
  t.RemoveCallback(id);
  t.Cancel(CancelReason::kAbort);
  t.Cancel(CancelReason::kAbort);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(removed, 0);
  int late = 0;
  t.OnCancel([&] { ++late; });
  EXPECT_EQ(late, 1) << "registering on a cancelled token runs at once";
}

TEST(CancelTest, DeadChildrenDoNotAccumulateOnParent) {
  CancelToken run;
  for (int i = 0; i < 10000; ++i) (void)run.Child();
  int fired = 0;
  run.OnCancel([&] { ++fired; });
  run.Cancel(CancelReason::kAbort);
  EXPECT_EQ(fired, 1);
}

TEST(CancelTest, WaitUntilWakesOnCancel) {
  CancelToken t;
  std::thread canceller([&] { t.Cancel(CancelReason::kAbort); });
  // An hour-long wait that must end as soon as the other thread cancels.
  bool reached =
      t.WaitUntil(std::chrono::steady_clock::now() + std::chrono::hours(1));
  canceller.join();
  EXPECT_FALSE(reached);
}

}  // namespace
}  // namespace steps
