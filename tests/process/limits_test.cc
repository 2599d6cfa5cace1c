#include "process/limits.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <thread>

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

TEST(DescriptorGateTest, TheLimitIsSharedThreeQuartersToConversations) {
  // 20000 descriptors: 19872 usable, 14904 for conversations (one each),
  // 4968 for processes (eight each).
  EXPECT_EQ(DescriptorGate::ConversationSlotsFor(20000), 14904u);
  EXPECT_EQ(DescriptorGate::ProcessSlotsFor(20000), 621u);
  // 10,000 conversations fit under a hard limit of 20000.
  EXPECT_GE(DescriptorGate::ConversationSlotsFor(20000), 10000u);
  // At and below the reserve, each gate still admits one.
  EXPECT_EQ(DescriptorGate::ConversationSlotsFor(kReservedDescriptors), 1u);
  EXPECT_EQ(DescriptorGate::ProcessSlotsFor(0), 1u);
  EXPECT_EQ(DescriptorGate::ProcessSlotsFor(kReservedDescriptors + 31), 1u);
  // An unlimited soft limit is capped.
  EXPECT_EQ(DescriptorGate::ConversationSlotsFor(UINT64_MAX), 1u << 20);
}

TEST(DescriptorGateTest, AWeightedLeaseWaitsUntilAllItsSlotsAreFree) {
  DescriptorGate gate(10);
  CancelToken never;
  DescriptorGate::Lease a = gate.Acquire(never, 7);
  EXPECT_EQ(gate.in_use(), 7u);
  CancelToken stop;
  bool got = false;
  std::thread waiter([&] {
    DescriptorGate::Lease b = gate.Acquire(stop, 5);
    got = b.held();
  });
  {
    DescriptorGate::Lease one = gate.Acquire(never, 1);  // 8 of 10.
    EXPECT_EQ(gate.in_use(), 8u);
  }
  // 5 do not fit beside 7: the waiter waits until cancelled.
  stop.Cancel(CancelReason::kAbort);
  waiter.join();
  EXPECT_FALSE(got);
  EXPECT_EQ(gate.in_use(), 7u);
  // More than the gate has is clamped to all of it.
  {
    DescriptorGate::Lease rest = gate.Acquire(never, 3);
    EXPECT_EQ(gate.in_use(), 10u);
  }
  DescriptorGate::Lease moved = std::move(a);
  EXPECT_EQ(gate.in_use(), 7u);
}

TEST(DescriptorGateTest, ALeaseForMoreThanTheGateHoldsTakesAllOfIt) {
  DescriptorGate gate(4);
  DescriptorGate::Lease all = gate.Acquire(CancelToken(), 100);
  EXPECT_TRUE(all.held());
  EXPECT_EQ(gate.in_use(), 4u);
}

// A thousand fibers queue for two slots: each gets its turn, never more
// than two hold one at once, and none is left queued.
TEST(DescriptorGateTest, FibersWaitingForSlotsGetThemInTurn) {
  DescriptorGate gate(2);
  CancelToken never;
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> served{0};
  {
    FiberPool pool;
    for (int i = 0; i < 1000; ++i) {
      pool.Spawn([&] {
        DescriptorGate::Lease lease = gate.Acquire(never);
        if (!lease.held()) return;
        const int now = ++holding;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        // Hold it across a park, so that others queue behind.
        SleepUntil(std::chrono::steady_clock::now() +
                   std::chrono::microseconds(100));
        --holding;
        ++served;
      });
    }
    pool.Join();
  }
  EXPECT_EQ(served.load(), 1000);
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(gate.in_use(), 0u);
  EXPECT_EQ(gate.waiting(), 0u);
}

// A waiter cancelled while queued leaves the queue with no lease, and the
// slot freed afterwards goes to nobody.
TEST(DescriptorGateTest, ACancelledWaiterLeavesTheQueue) {
  DescriptorGate gate(1);
  DescriptorGate::Lease held = gate.Acquire(CancelToken());
  CancelToken stop;
  bool got = true;
  std::thread waiter([&] { got = gate.Acquire(stop).held(); });
  while (gate.waiting() != 1) std::this_thread::yield();
  stop.Cancel(CancelReason::kAbort);
  waiter.join();
  EXPECT_FALSE(got);
  EXPECT_EQ(gate.waiting(), 0u);
  { DescriptorGate::Lease gone = std::move(held); }
  EXPECT_EQ(gate.in_use(), 0u);
}

}  // namespace
}  // namespace steps
