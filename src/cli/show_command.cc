// `steps show [RUN] [--json]`: a recorded run as the spec's listing.
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

struct ShowOptions {
  std::string run;
  std::string state_dir = ".steps";
  bool json = false;
};

int RunShow(const ShowOptions& opts) {
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(opts.state_dir));
  if (!st.ok()) {
    std::cerr << "steps show: " << st.status().message() << "\n";
    return kExitJobFailed;
  }
  Result<store::StoredRun> run = store::LoadRun(**st, opts.run);
  if (!run.ok()) {
    std::cerr << "steps show: " << run.status().message() << "\n";
    return run.status().code() == StatusCode::kInvalidArgument ? kExitUsage
                                                               : kExitJobFailed;
  }
  if (opts.json) {
    std::cout << DumpJson(store::RunToJson(*run), 2) << "\n";
  } else {
    std::cout << store::FormatRun(*run);
  }
  return kExitOk;
}

}  // namespace

Command ShowCommand() {
  return {"show", "Print a recorded run: steps, attempts, agents' turns",
          [](CLI::App& app) -> std::function<int()> {
            auto opts = std::make_shared<ShowOptions>();
            app.add_option("run", opts->run,
                           "Run id, or a unique prefix of one (default: the "
                           "newest run)");
            app.add_option("--state-dir", opts->state_dir,
                           "Where runs are recorded (STATE_DIR/steps.db)")
                ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
            app.add_flag("--json", opts->json,
                         "Print the record as JSON (steps.run/1, see "
                         "docs/json.md)");
            app.footer(
                "Each step is numbered in the order it finished; each attempt "
                "reads\n"
                "  (attempt k/n)  outcome   duration   hash: xxxxxxxx\n"
                "  Taken by: user@host\n"
                "where the hash is the start of the step's cache key. A step "
                "reused from\n"
                "the step cache says 'cached'; a run whose process died says "
                "'interrupted'.");
            return [opts] { return RunShow(*opts); };
          }};
}

}  // namespace steps::cli
