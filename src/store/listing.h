// How `steps show` and `steps runs` print stored runs: the listing of spec
// text 000 ("  1. fetch", "(attempt 1/3)  error   1ms   hash: 44136fa3",
// "Taken by: user@host"), with agents' turns, requests and tokens. The
// JSON of --json is store/run_json.h's.
#ifndef STEPS_STORE_LISTING_H_
#define STEPS_STORE_LISTING_H_

#include <string>
#include <vector>

#include "store/reader.h"

namespace steps::store {

// The run as text: a header, then per job its numbered steps, each with its
// attempts. A cached step's attempt says `cached`.
std::string FormatRun(const StoredRun& run);

// One line per run, newest first, under a header line.
std::string FormatRunList(const std::vector<StoredRun>& runs);

// "$0.0123": dollars to the hundredth of a cent.
std::string FormatUsd(double usd);

// "2026-11-30T06:30:00.123Z".
std::string FormatTimestamp(int64_t epoch_ms);

}  // namespace steps::store

#endif  // STEPS_STORE_LISTING_H_
