// `steps cost [--since DATE] [--by agent|model|job|run] [--json]`: what the
// recorded runs' agents spent, summed (store/cost.h).
#include <algorithm>
#include <ctime>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/json_text.h"
#include "store/cost.h"
#include "store/store.h"

namespace steps::cli {

namespace {

struct CostOptions {
  std::string state_dir = ".steps";
  std::string since;
  bool since_given = false;  // --since "" is refused, not taken as none.
  std::string by;
  bool by_given = false;
  bool json = false;
};

// UTC "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM[:SS][Z]" as ms since the epoch.
std::optional<int64_t> ParseUtcDate(const std::string& text) {
  std::tm tm{};
  int n = 0;
  const char* s = text.c_str();
  if (std::sscanf(s, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &n) != 3 ||
      n != 10) {
    return std::nullopt;
  }
  const char* rest = s + n;
  if (*rest == 'T' || *rest == ' ') {
    int m = 0;
    if (std::sscanf(rest + 1, "%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &m) != 2 ||
        m != 5) {
      return std::nullopt;
    }
    rest += 1 + m;
    if (*rest == ':') {
      int k = 0;
      if (std::sscanf(rest + 1, "%2d%n", &tm.tm_sec, &k) != 1 || k != 2)
        return std::nullopt;
      rest += 1 + k;
    }
    if (*rest == 'Z') ++rest;
  }
  if (*rest != '\0') return std::nullopt;
  const std::tm asked = tm;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t t = timegm(&tm);
  // A day or time out of range (2026-02-30, 25:00) comes back moved.
  if (t == static_cast<time_t>(-1) || tm.tm_year + 1900 != asked.tm_year ||
      tm.tm_mon + 1 != asked.tm_mon || tm.tm_mday != asked.tm_mday ||
      tm.tm_hour != asked.tm_hour || tm.tm_min != asked.tm_min ||
      tm.tm_sec != asked.tm_sec) {
    return std::nullopt;
  }
  return static_cast<int64_t>(t) * 1000;
}

// --since: a date (UTC) or how long ago ("7d", "12h", "30m").
Result<int64_t> ParseSince(const std::string& text, int64_t now_ms) {
  const Status bad = InvalidArgument(
      "--since " + text +
      ": a date (2026-12-01, 2026-12-01T09:30:00Z, UTC) or how long ago "
      "(7d, 12h, 1d12h)");
  if (text.empty()) return bad;
  if (std::optional<int64_t> at = ParseUtcDate(text)) {
    return std::max<int64_t>(0, *at);
  }
  std::string duration = text;
  int64_t days = 0;
  if (size_t d = text.find('d'); d != std::string::npos && d > 0) {
    const std::string count = text.substr(0, d);
    if (count.find_first_not_of("0123456789") == std::string::npos &&
        count.size() <= 6) {
      days = std::stoll(count);
      duration = text.substr(d + 1);
    }
  }
  Millis ago{days * 86400000};
  if (!duration.empty()) {
    Result<Millis> rest = ParseDuration(duration);
    if (!rest.ok() || rest->count() < 0) return bad;
    ago += *rest;
  }
  // Before 1970 nothing was recorded: from then on is every run.
  return std::max<int64_t>(0, now_ms - ago.count());
}

int RunCost(const CostOptions& opts) {
  store::CostBy by = store::CostBy::kTotal;
  if (opts.by_given) {
    std::optional<store::CostBy> parsed = store::ParseCostBy(opts.by);
    if (!parsed) {
      std::cerr << "steps cost: --by " << opts.by
                << ": one of agent, model, job, run\n";
      return kExitUsage;
    }
    by = *parsed;
  }
  std::optional<int64_t> since;
  if (opts.since_given) {
    const int64_t now_ms = std::chrono::duration_cast<Millis>(
                               RealClock().WallNow().time_since_epoch())
                               .count();
    Result<int64_t> at = ParseSince(opts.since, now_ms);
    if (!at.ok()) {
      std::cerr << "steps cost: " << at.status().message() << "\n";
      return kExitUsage;
    }
    since = *at;
  }
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(opts.state_dir));
  if (!st.ok()) {
    // As `steps runs` does: no store is nothing to read, exit 1.
    std::cerr << "steps cost: " << st.status().message() << "\n";
    return kExitJobFailed;
  }
  Result<store::CostReport> report = store::SumCost(**st, since, by);
  if (!report.ok()) {
    std::cerr << "steps cost: " << report.status().message() << "\n";
    return kExitJobFailed;
  }
  if (opts.json) {
    std::cout << DumpJson(store::CostToJson(*report), 2) << "\n";
  } else {
    std::cout << store::FormatCost(*report);
  }
  return kExitOk;
}

}  // namespace

Command CostCommand() {
  return {"cost", "Sum the tokens and cost of recorded runs' agents",
          [](CLI::App& app) -> std::function<int()> {
            auto opts = std::make_shared<CostOptions>();
            app.add_option(
                   "--since", opts->since,
                   "Only runs started at or after this: a date "
                   "(2026-12-01, 2026-12-01T09:30:00Z; UTC) or how long "
                   "ago (7d, 12h)")
                ->type_name("DATE")
                ->each(
                    [opts](const std::string&) { opts->since_given = true; });
            app.add_option("--by", opts->by,
                           "One line per agent entry, model, job or run, most "
                           "expensive first; default: the total only")
                ->type_name("agent|model|job|run")
                ->each([opts](const std::string&) { opts->by_given = true; });
            app.add_option("--state-dir", opts->state_dir,
                           "Where runs are recorded (STATE_DIR/steps.db)")
                ->envname("STEPS_STATE_DIR")
                ->capture_default_str();
            app.add_flag("--json", opts->json,
                         "Print the sums as JSON (docs/observability.md)");
            app.footer(
                "A turn costs what its source's price: says, else what the "
                "provider reported,\n"
                "else what the --prices table of its run said, else nothing "
                "(docs/observability.md).\n"
                "Cached steps spent nothing. Exit codes: 0; 1 no run store; 64 "
                "bad command line.");
            return [opts] { return RunCost(*opts); };
          }};
}

}  // namespace steps::cli
