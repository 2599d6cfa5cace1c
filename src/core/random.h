// Random numbers that need not be secret: retry jitter, the names of
// temporary files, run ids. Each thread draws from a generator of its own
// (splitmix64: 8 bytes of state), seeded from the kernel (getrandom) the
// first time the thread asks. No lock, and almost nothing per thread: a
// fan-out runs a thread per conversation, and a generator such as
// std::mt19937_64 (2.5 KB) or a std::random_device on the stack (5 KB)
// would cost each of them that much memory more.
#ifndef STEPS_CORE_RANDOM_H_
#define STEPS_CORE_RANDOM_H_

#include <cstdint>

namespace steps {

uint64_t RandomU64();

// Uniform in [0, 1).
double RandomUnit();

}  // namespace steps

#endif  // STEPS_CORE_RANDOM_H_
