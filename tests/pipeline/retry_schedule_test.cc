#include "pipeline/retry_schedule.h"

#include <gtest/gtest.h>

namespace steps::pipeline {
namespace {

RetrySpec Spec(Backoff b, int base, std::optional<int> max = std::nullopt) {
  RetrySpec r;
  r.backoff = b;
  r.base_delay = Millis(base);
  if (max) r.max_delay = Millis(*max);
  return r;
}

// Spec text 000's table, without the measured overhead of 1-3 ms.
TEST(RetryScheduleTest, SpecTable) {
  using V = std::vector<Millis>;
  EXPECT_EQ(RetryWaits(Spec(Backoff::kFixed, 200), 4),
            (V{Millis(200), Millis(200), Millis(200)}));
  EXPECT_EQ(RetryWaits(Spec(Backoff::kLinear, 200), 4),
            (V{Millis(200), Millis(400), Millis(600)}));
  EXPECT_EQ(RetryWaits(Spec(Backoff::kExponential, 200), 4),
            (V{Millis(200), Millis(400), Millis(800)}));
  EXPECT_EQ(RetryWaits(Spec(Backoff::kExponential, 200, 300), 4),
            (V{Millis(200), Millis(300), Millis(300)}));
}

TEST(RetryScheduleTest, NoBaseMeansNoWait) {
  EXPECT_EQ(RetryWaits(Spec(Backoff::kExponential, 0), 3),
            (std::vector<Millis>{Millis(0), Millis(0)}));
  EXPECT_TRUE(RetryWaits(Spec(Backoff::kFixed, 100), 1).empty());
}

TEST(RetryScheduleTest, HugeAttemptCountsDoNotOverflow) {
  RetrySpec r = Spec(Backoff::kExponential, 1000000);
  Millis w = RetryWait(r, 1000);
  EXPECT_GT(w.count(), 0);
  RetrySpec capped = Spec(Backoff::kExponential, 1000000, 5000);
  EXPECT_EQ(RetryWait(capped, 1000), Millis(5000));
  EXPECT_GT(RetryWait(Spec(Backoff::kLinear, 1000000000), 1000000).count(), 0);
}

}  // namespace
}  // namespace steps::pipeline
