// Waiter on plain threads: one thread waits until another gives it a
// value, on a futex of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace steps
