// What the model is told about its deadline: the disclosure in the system
// message (once, up front, whenever a deadline applies) and the nudge (once,
// on the first request made after less than a fifth of the time remains).
#ifndef STEPS_AGENT_DEADLINE_NOTICE_H_
#define STEPS_AGENT_DEADLINE_NOTICE_H_

#include <string>

#include "core/clock.h"
#include "core/duration.h"

namespace steps::agent {

// How the disclosure and the nudge begin: the part of each that never
// changes with the clock (a recording expects the rest to).
inline constexpr const char kDisclosurePrefix[] = "Deadline: you have ";
inline constexpr const char kNudgePrefix[] =
    "Time is almost up: less than a fifth of your ";

// A calendar time as "2026-11-30 07:41:48 UTC" (whole seconds, rounded
// down).
std::string FormatUtc(WallTime t);

// The sentence appended to the system message when a deadline applies:
// how long the whole conversation may take and when that time ends.
//   "Deadline: you have 10m for this whole task, tool calls included; it
//    ends at 2026-11-30 07:41:48 UTC. Give your final answer before then:
//    at the deadline the conversation is cut off without an answer."
std::string DisclosureText(Millis timeout, WallTime ends_at);

// The plain user message that asks the model to wrap up. `remaining` is
// shown rounded down to whole seconds (or in milliseconds under a second).
//   "Time is almost up: less than a fifth of your 10m deadline is left
//    (about 1m59s). Wrap up now: finish what you are doing and give your
//    final answer."
std::string NudgeText(Millis remaining, Millis timeout);

// True when less than a fifth of `timeout` remains at `now` before `end`:
// 5 * (end - now) < timeout, compared exactly (no rounding), so exactly a
// fifth left is not yet due.
bool NudgeDue(SteadyTime now, SteadyTime end, Millis timeout);

}  // namespace steps::agent

#endif  // STEPS_AGENT_DEADLINE_NOTICE_H_
