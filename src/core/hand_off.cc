#include "core/hand_off.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>


namespace steps {
namespace {

static_assert(sizeof(std::atomic<int>) == sizeof(int),
              "the futex word is the atomic's int");

long Futex(std::atomic<int>* word, int op, int value) {
  return syscall(SYS_futex, reinterpret_cast<int*>(word), op, value, nullptr,
                 nullptr, 0);
}

}  // namespace

int HandOff::Wait() {
  while (true) {
    int v = state_.load(std::memory_order_acquire);
    if (v != 0) return v;
    // Sleeps only while the word is still 0; EAGAIN (it changed) and EINTR
    // go round again.
    Futex(&state_, FUTEX_WAIT_PRIVATE, 0);
  }
}

void HandOff::Give(int value) {
  std::atomic<int>* word = &state_;
  word->store(value, std::memory_order_release);
  Futex(word, FUTEX_WAKE_PRIVATE, 1);
}

}  // namespace steps
