// What recorded runs spent, summed for `steps cost`: every agent turn of
// every run started since a time (cached steps spent nothing), grouped by
// agent entry, model, job or run.
//
//   Result<CostReport> r = SumCost(store, since_ms, CostBy::kModel);
//   std::cout << FormatCost(*r);
#ifndef STEPS_STORE_COST_H_
#define STEPS_STORE_COST_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace steps::store {

enum class CostBy { kTotal, kAgent, kModel, kJob, kRun };

// "agent", "model", "job", "run"; nullopt for anything else.
std::optional<CostBy> ParseCostBy(std::string_view text);

struct CostGroup {
  // The agent entry, the model ("PROVIDER/MODEL", "cli: COMMAND"), "JOB
  // (FILE)" or the run id; "total" for the sum.
  std::string key;
  int runs = 0;
  int steps = 0;
  int turns = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
};

struct CostReport {
  CostBy by = CostBy::kTotal;
  std::optional<int64_t> since_ms;
  // Most expensive first (then most tokens, then by key); empty for
  // kTotal.
  std::vector<CostGroup> groups;
  CostGroup total;
};

// Turns of runs started at or after `since_ms` (all when unset).
Result<CostReport> SumCost(Store& store, std::optional<int64_t> since_ms,
                           CostBy by);

// A table, one line per group and a TOTAL line under it.
std::string FormatCost(const CostReport& report);

// {"by", "since", "groups": [...], "total": {...}} (docs/json.md).
nlohmann::json CostToJson(const CostReport& report);

}  // namespace steps::store

#endif  // STEPS_STORE_COST_H_
