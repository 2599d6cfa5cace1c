#include "core/random.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>

namespace steps {
namespace {

// Kept out of line: RandomU64 is small and may be inlined into callers
// whose stack frames should stay small.
[[gnu::noinline]] uint64_t Seed() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == sizeof seed) return seed;
  // No entropy to be had (a very early boot): the time and the thread id
  // still tell threads and processes apart.
  const uint64_t now = static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return now ^ (static_cast<uint64_t>(gettid()) << 32) ^
         static_cast<uint64_t>(getpid());
}

}  // namespace

uint64_t RandomU64() {
  thread_local uint64_t state = 0;
  thread_local bool seeded = false;
  if (!seeded) {
    state = Seed();
    seeded = true;
  }
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double RandomUnit() {
  // The top 53 bits, as many as a double's mantissa holds.
  return static_cast<double>(RandomU64() >> 11) * 0x1.0p-53;
}

}  // namespace steps
