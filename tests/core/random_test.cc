// The per-thread generator: values in range, spread out, different on
// every thread, and no large state per thread.
#include "core/random.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace steps {
namespace {

TEST(RandomTest, UnitValuesAreInRangeAndSpreadOut) {
  constexpr int kDraws = 20000;
  double sum = 0;
  int low = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double u = RandomUnit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    if (u < 0.1) ++low;
  }
  // Mean 0.5, standard error 0.002; a tenth of the draws below 0.1,
  // standard error 0.002 of the share. Both within ten of those.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.02);
  EXPECT_NEAR(static_cast<double>(low) / kDraws, 0.1, 0.02);
}

TEST(RandomTest, NoTwoDrawsOfAThreadRepeatInAShortRun) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) EXPECT_TRUE(seen.insert(RandomU64()).second);
}

TEST(RandomTest, EachThreadHasItsOwnSequence) {
  constexpr int kThreads = 16;
  std::vector<uint64_t> first(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&first, t] { first[t] = RandomU64(); });
  }
  for (std::thread& t : threads) t.join();
  const std::set<uint64_t> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), first.size())
      << "threads seeded alike draw alike";
}

}  // namespace
}  // namespace steps
