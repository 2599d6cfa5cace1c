// `steps runs [--json]`: the recorded runs, newest first.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/json_text.h"
#include "store/listing.h"
#include "store/reader.h"
#include "store/run_json.h"
#include "store/store.h"

namespace steps::cli {
namespace {

struct RunsOptions {
  std::string state_dir = ".steps";
  int limit = 0;
  bool json = false;
};

int RunRuns(const RunsOptions& opts) {
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(opts.state_dir));
  std::vector<store::StoredRun> runs;
  if (st.ok()) {
    Result<std::vector<store::StoredRun>> listed =
        store::ListRuns(**st, opts.limit);
    if (!listed.ok()) {
      std::cerr << "steps runs: " << listed.status().message() << "\n";
      return kExitJobFailed;
    }
    runs = std::move(*listed);
  } else {
    // As `steps show` does: no store is nothing to read, exit 1.
    std::cerr << "steps runs: " << st.status().message() << "\n";
    return kExitJobFailed;
  }
  if (opts.json) {
    std::cout << DumpJson(store::RunListToJson(runs), 2) << "\n";
  } else {
    std::cout << store::FormatRunList(runs);
  }
  return kExitOk;
}

}  // namespace

Command RunsCommand() {
  return {"runs", "List recorded runs, newest first",
          [](CLI::App& app) -> std::function<int()> {
            auto opts = std::make_shared<RunsOptions>();
            app.add_option("--state-dir", opts->state_dir,
                           "Where runs are recorded (STATE_DIR/steps.db)")
                ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
            app.add_option("-n,--limit", opts->limit,
                           "Show at most this many (default: all)");
            app.add_flag("--json", opts->json,
                         "Print the list as JSON: run summaries "
                         "(steps.run/1, see docs/json.md)");
            return [opts] { return RunRuns(*opts); };
          }};
}

}  // namespace steps::cli
