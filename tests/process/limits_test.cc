#include "process/limits.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace steps {
namespace {

TEST(RaiseOpenFileLimitTest, SoftLimitReachesTheHardLimitOrTheCeiling) {
  struct rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  Result<uint64_t> raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  struct rlimit after;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(*raised, after.rlim_cur);
  EXPECT_GE(after.rlim_cur, before.rlim_cur);
  EXPECT_TRUE(after.rlim_cur == after.rlim_max || after.rlim_cur >= (1u << 20));
  // Idempotent.
  EXPECT_EQ(*RaiseOpenFileLimit(), *raised);
}

}  // namespace
}  // namespace steps
