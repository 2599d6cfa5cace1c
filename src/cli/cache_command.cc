// `steps cache ls [--json]` and `steps cache clear [--step NAME]
// [--older-than DURATION]`: the step cache's entries (docs/store.md).
#include <chrono>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/duration.h"
#include "core/json_text.h"
#include "store/cache.h"
#include "store/listing.h"
#include "store/store.h"

namespace steps::cli {
namespace {

struct CacheOptions {
  std::string state_dir = ".steps";
  bool json = false;
  std::string step;
  std::string older_than;
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int RunCacheLs(const CacheOptions& opts) {
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(opts.state_dir));
  if (!st.ok()) {
    // As `steps runs` does: no store is nothing to read, exit 1.
    std::cerr << "steps cache ls: " << st.status().message() << "\n";
    return kExitJobFailed;
  }
  Result<std::vector<store::CacheEntryInfo>> entries =
      store::ListCacheEntries(**st);
  if (!entries.ok()) {
    std::cerr << "steps cache ls: " << entries.status().message() << "\n";
    return kExitJobFailed;
  }
  if (!opts.json) {
    std::cout << store::FormatCacheEntries(*entries, NowMs());
    return kExitOk;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const store::CacheEntryInfo& e : *entries) {
    list.push_back({{"key", e.key},
                    {"run", e.run_id},
                    {"step", e.step_id},
                    {"name", e.step_name},
                    {"created", store::FormatTimestamp(e.created_ms)},
                    {"size_bytes", e.size_bytes},
                    {"usable", e.usable}});
  }
  std::cout << DumpJson(list, 2) << "\n";
  return kExitOk;
}

int RunCacheClear(const CacheOptions& opts) {
  store::CacheClearFilter filter;
  if (!opts.step.empty()) filter.step = opts.step;
  if (!opts.older_than.empty()) {
    Result<Millis> age = ParseDuration(opts.older_than);
    if (!age.ok()) {
      std::cerr << "steps cache clear: --older-than " << opts.older_than << ": "
                << age.status().message()
                << " (write a duration such as 30m, 12h or 1h30m)\n";
      return kExitUsage;
    }
    filter.created_before_ms = NowMs() - age->count();
  }
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(opts.state_dir));
  if (!st.ok()) {
    std::cout << "removed 0 entries (" << st.status().message() << ")\n";
    return kExitOk;
  }
  Result<int64_t> removed =
      store::ClearCacheEntries(**st, store::CacheDir(opts.state_dir), filter);
  if (!removed.ok()) {
    std::cerr << "steps cache clear: " << removed.status().message() << "\n";
    return kExitJobFailed;
  }
  std::cout << "removed " << *removed
            << (*removed == 1 ? " entry\n" : " entries\n");
  return kExitOk;
}

void AddStateDir(CLI::App& app, CacheOptions& opts) {
  app.add_option(
         "--state-dir", opts.state_dir,
         "Where runs are recorded (STATE_DIR/steps.db, STATE_DIR/cache)")
      ->envname("STEPS_STATE_DIR")
      ->capture_default_str();
}

}  // namespace

Command CacheCommand() {
  return {
      "cache", "List or clear the step cache's entries",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<CacheOptions>();
        auto chosen = std::make_shared<std::function<int()>>();
        app.require_subcommand(1);
        CLI::App* ls = app.add_subcommand(
            "ls", "List the entries: key, step, run it came from, age, size");
        AddStateDir(*ls, *opts);
        ls->add_flag("--json", opts->json, "Print the list as JSON");
        ls->callback(
            [opts, chosen] { *chosen = [opts] { return RunCacheLs(*opts); }; });
        CLI::App* clear = app.add_subcommand(
            "clear",
            "Remove entries: all, or a step's (--step), or older ones "
            "(--older-than)");
        AddStateDir(*clear, *opts);
        clear->add_option("--step", opts->step,
                          "Only this step's entries (its name, or its id "
                          "JOB:N as `steps show` numbers it)");
        clear->add_option("--older-than", opts->older_than,
                          "Only entries older than this (30m, 12h, 1h30m)");
        clear->callback([opts, chosen] {
          *chosen = [opts] { return RunCacheClear(*opts); };
        });
        return [chosen] { return *chosen ? (*chosen)() : kExitUsage; };
      }};
}

}  // namespace steps::cli
