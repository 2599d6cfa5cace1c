#include "pipeline/retry_schedule.h"

#include <algorithm>

namespace steps::pipeline {

Millis RetryWait(const RetrySpec& retry, int attempt) {
  // Beyond this the product overflows long before it matters: clamp.
  constexpr int64_t kCeiling = int64_t{1} << 50;
  const int64_t base = retry.base_delay.count();
  const int step = std::max(attempt - 1, 1);  // 1 before attempt 2.
  int64_t wait = base;
  switch (retry.backoff) {
    case Backoff::kFixed:
      break;
    case Backoff::kLinear:
      wait = base > kCeiling / step ? kCeiling : base * step;
      break;
    case Backoff::kExponential: {
      int shift = std::min(step - 1, 50);
      wait = base > (kCeiling >> shift) ? kCeiling : base << shift;
      break;
    }
  }
  if (retry.max_delay) wait = std::min(wait, retry.max_delay->count());
  return Millis(wait);
}

std::vector<Millis> RetryWaits(const RetrySpec& retry, int attempts) {
  std::vector<Millis> waits;
  for (int a = 2; a <= attempts; ++a) waits.push_back(RetryWait(retry, a));
  return waits;
}

}  // namespace steps::pipeline
