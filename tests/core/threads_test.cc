// Waiter (on plain threads) and ProvideFutexSlots: the two pieces that let
// thousands of sleeping threads be woken cheaply.
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "core/futex_slots.h"
#include "core/fiber.h"

namespace steps {
namespace {

TEST(WaiterOnThreadsTest, TheWaiterGetsTheValueGivenBeforeOrAfterItWaits) {
  Waiter early;
  early.Give(7);
  EXPECT_EQ(early.Wait(), 7);
  EXPECT_EQ(early.Peek(), 7);

  Waiter late;
  EXPECT_EQ(late.Peek(), 0);
  std::atomic<int> got{0};
  std::thread waiter([&] { got = late.Wait(); });
  late.Give(2);
  waiter.join();
  EXPECT_EQ(got.load(), 2);

  // Reset makes it new: a second Give wakes a second Wait.
  late.Reset();
  EXPECT_EQ(late.Peek(), 0);
  std::thread again([&] { got = late.Wait(); });
  late.Give(3);
  again.join();
  EXPECT_EQ(got.load(), 3);
}

// The waiter destroys its Waiter as soon as Wait returns, as a group
// commit's writer does with the entry on its stack: under the sanitizers a
// Give that touched the object after waking it would be caught here.
TEST(WaiterOnThreadsTest, AWaiterMayDestroyItAsSoonAsItIsWoken) {
  constexpr int kRounds = 2000;
  std::vector<std::thread> waiters;
  std::vector<Waiter*> slots(kRounds, nullptr);
  std::atomic<int> ready{0};
  std::atomic<int> woken{0};
  for (int i = 0; i < kRounds; ++i) {
    waiters.emplace_back([&, i] {
      auto h = std::make_unique<Waiter>();
      slots[i] = h.get();
      ready.fetch_add(1);
      if (h->Wait() == 1) woken.fetch_add(1);
    });
    // One at a time, so that slots[i] is published before it is given.
    while (ready.load() <= i) std::this_thread::yield();
    slots[i]->Give(1);
  }
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(woken.load(), kRounds);
}

bool KernelHasOwnTables() {
  return prctl(78 /* PR_FUTEX_HASH */, 2 /* GET_SLOTS */, 0, 0, 0) >= 0;
}

TEST(FutexSlotsTest, GrowsForManyThreadsAndNeverShrinks) {
  if (!KernelHasOwnTables()) {
    GTEST_SKIP() << "this kernel has no per-process futex table (Linux "
                    "6.16 and later have one): nothing to size";
  }
  const int before = prctl(78, 2, 0, 0, 0);
  // Below the threshold nothing changes.
  EXPECT_EQ(ProvideFutexSlots(kFutexSlotsFrom - 1),
            static_cast<size_t>(before));
  EXPECT_EQ(prctl(78, 2, 0, 0, 0), before);
  // 3000 threads: the next power of two at or above 6000.
  EXPECT_EQ(ProvideFutexSlots(3000), 8192u);
  EXPECT_EQ(prctl(78, 2, 0, 0, 0), 8192);
  // A smaller fan-out later leaves the table as it is.
  EXPECT_EQ(ProvideFutexSlots(300), 8192u);
  EXPECT_EQ(prctl(78, 2, 0, 0, 0), 8192);
  // However many threads, the table stays bounded.
  EXPECT_EQ(ProvideFutexSlots(size_t{1} << 30), kMaxFutexSlots);
  EXPECT_EQ(prctl(78, 2, 0, 0, 0), static_cast<int>(kMaxFutexSlots));
}

}  // namespace
}  // namespace steps
