// The one JSON shape of a recorded run, served by `steps show --json`,
// `steps runs --json` and the web UI's API (docs/json.md documents every
// key). Times are RFC 3339 UTC strings with milliseconds
// ("2026-11-30T06:30:00.123Z"); durations are integers in milliseconds;
// spends are prompt and completion tokens and US dollars.
#ifndef STEPS_STORE_RUN_JSON_H_
#define STEPS_STORE_RUN_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/reader.h"

namespace steps::store {

// The value of every object's "schema" key. A change that removes or
// renames a key, or changes its type or meaning, bumps the number; a key
// added is no change of version.
inline constexpr const char* kRunJsonSchema = "steps.run/1";

// The run summary: the run object without "jobs" (what ListRuns reads).
nlohmann::json RunSummaryToJson(const StoredRun& run);

// The whole run: the summary's keys, then "jobs": the jobs that started,
// then those of its plan that did not (outcome "pending" while the run
// runs, else "not started"), each with its plan, steps, attempts and agent
// turns.
nlohmann::json RunToJson(const StoredRun& run);

// Run summaries, newest first, as `steps runs --json` prints them.
nlohmann::json RunListToJson(const std::vector<StoredRun>& runs);

}  // namespace steps::store

#endif  // STEPS_STORE_RUN_JSON_H_
