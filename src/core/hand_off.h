// HandOff: one thread waits until another gives it a value, at the cost of
// one futex wait and one wake. No lock is shared: a thousand writers each
// waiting on a hand-off of their own are woken one by one without queueing
// again behind a common mutex (which a condition variable would make them
// do, each wake then costing a second wait and a second wake).
#ifndef STEPS_CORE_HAND_OFF_H_
#define STEPS_CORE_HAND_OFF_H_

#include <atomic>

namespace steps {

class HandOff {
 public:
  HandOff() = default;
  HandOff(const HandOff&) = delete;
  HandOff& operator=(const HandOff&) = delete;

  // Blocks until Give; returns the value given.
  int Wait();
  // The value given so far; 0 before Give.
  int Peek() const { return state_.load(std::memory_order_acquire); }
  // Gives `value` (not 0) and wakes the waiter. The waiter may destroy the
  // hand-off as soon as Wait returns: after the value is stored, Give uses
  // only its address, in the wake (a wake on an address nobody waits on
  // wakes nobody).
  void Give(int value);
  // Makes the hand-off new again (Peek 0, Wait blocks), to be given once
  // more. REQUIRES: no Give until the reset is seen (the giver and the
  // resetter share a lock). A wake left over from the last Give may still
  // come; Wait sleeps again on it.
  void Reset() { state_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<int> state_{0};
};

}  // namespace steps

#endif  // STEPS_CORE_HAND_OFF_H_
