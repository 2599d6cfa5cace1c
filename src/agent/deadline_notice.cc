#include "agent/deadline_notice.h"

#include <ctime>

namespace steps::agent {

std::string FormatUtc(WallTime t) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(
      std::chrono::floor<std::chrono::seconds>(t));
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string DisclosureText(Millis timeout, WallTime ends_at) {
  return kDisclosurePrefix + FormatDuration(timeout) +
         " for this whole task, tool calls included; it ends at " +
         FormatUtc(ends_at) +
         ". Give your final answer before then: at the deadline the "
         "conversation is cut off without an answer.";
}

std::string NudgeText(Millis remaining, Millis timeout) {
  Millis shown = remaining >= std::chrono::seconds(1)
                     ? std::chrono::floor<std::chrono::seconds>(remaining)
                     : remaining;
  return kNudgePrefix + FormatDuration(timeout) + " deadline is left (about " +
         FormatDuration(shown) +
         "). Wrap up now: finish what you are doing and give your final "
         "answer.";
}

bool NudgeDue(SteadyTime now, SteadyTime end, Millis timeout) {
  if (now >= end) return true;
  return (end - now) * 5 < timeout;
}

}  // namespace steps::agent
