// Durations as users write them ("500ms", "30s", "2m", "1h30m") and as
// steps prints them. Everything from the loader on is std::chrono.
#ifndef STEPS_CORE_DURATION_H_
#define STEPS_CORE_DURATION_H_

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"

namespace steps {

using Millis = std::chrono::milliseconds;

// Parses a sequence of <integer><unit> parts with units h, m, s, ms, each
// unit at most once and in that order: "500ms", "30s", "2m", "1h30m",
// "1m30s500ms". A leading '-' yields a negative duration (callers decide
// whether that is allowed). A bare integer is refused here: its unit depends
// on the key it sits under, see ParseDurationWithUnit.
Result<Millis> ParseDuration(std::string_view text);

// Like ParseDuration, but a bare integer (e.g. "30") is read in `bare_unit`.
Result<Millis> ParseDurationWithUnit(std::string_view text, Millis bare_unit);

// Shortest exact form for people: "0s", "250ms", "30s", "1h30m", "1m1.5s".
std::string FormatDuration(Millis d);

}  // namespace steps

#endif  // STEPS_CORE_DURATION_H_
