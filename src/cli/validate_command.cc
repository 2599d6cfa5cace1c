// `steps validate [--strict] FILE...`
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "pipeline/loader.h"
#include "pipeline/source_check.h"
#include "process/local_launcher.h"
#include "process/sandbox_bwrap.h"

namespace steps::cli {
namespace {

std::string Plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

struct ValidateOptions {
  std::vector<std::string> files;
  bool strict = false;
};

// A pipeline that asks for `sandbox: bwrap` on a machine where bwrap cannot
// run loads, but its sandboxed steps would refuse to run: a warning at the
// first such `sandbox:`, saying why and what to do.
void WarnIfBwrapUnusable(pipeline::LoadResult& r) {
  if (!r.pipeline) return;
  const int line = r.pipeline->FirstBwrapLine();
  if (line == 0) return;
  LocalProcessLauncher launcher;
  if (Status s = CheckBwrap(launcher); !s.ok())
    r.diagnostics.Warn(line, s.message());
}

// Agent sources `steps run` would refuse here (a key variable not set): a
// warning each, since the file may be run elsewhere. A file with a mock:
// block is meant for steps test and --mock, where no key is needed.
void WarnIfSourcesUnservable(pipeline::LoadResult& r) {
  if (!r.pipeline || r.pipeline->mock) return;
  pipeline::ResolvedPlan plan(r.pipeline);
  for (const pipeline::SourceProblem& p : pipeline::CheckSourceEnvironment(
           plan, {}, pipeline::ProcessEnvLookup())) {
    r.diagnostics.Warn(p.line, p.message + "; steps run refuses to start");
  }
}

}  // namespace

std::string ValidSummary(const std::string& name, int steps, int warnings,
                         bool strict) {
  std::string out = "Valid: " + name + " (" + Plural(steps, "step") + ")";
  if (warnings) {
    out += " — " + Plural(warnings, "warning");
    if (strict) out += "; failing due to --strict";
  }
  return out;
}

ValidateReport ValidateFile(const std::string& file, bool strict) {
  pipeline::LoadResult r = pipeline::LoadPipelineFile(file);
  WarnIfBwrapUnusable(r);
  WarnIfSourcesUnservable(r);
  ValidateReport report;
  report.diagnostics = r.diagnostics.FormatAll();
  const std::string name = std::filesystem::path(file).stem().string();
  const int errors = r.diagnostics.error_count();
  const int warnings = r.diagnostics.warning_count();
  if (errors > 0) {
    report.summary = "Invalid: " + name + " — " + Plural(errors, "error");
    if (warnings) report.summary += ", " + Plural(warnings, "warning");
    report.refused = true;
    return report;
  }
  int steps = 0;
  for (const pipeline::Job& job : r.pipeline->jobs)
    steps += pipeline::CountSteps(job.plan);
  report.summary = ValidSummary(name, steps, warnings, strict);
  report.refused = warnings > 0 && strict;
  return report;
}

namespace {

int RunValidate(const ValidateOptions& opts) {
  int exit_code = kExitOk;
  for (const std::string& file : opts.files) {
    ValidateReport report = ValidateFile(file, opts.strict);
    std::cerr << report.diagnostics;
    std::cout << report.summary << "\n";
    if (report.refused) exit_code = kExitRefused;
  }
  return exit_code;
}

}  // namespace

Command ValidateCommand() {
  return {"validate",
          "Load pipeline files and report errors and warnings with their lines",
          [](CLI::App& app) -> std::function<int()> {
            auto opts = std::make_shared<ValidateOptions>();
            app.add_option("files", opts->files, "Pipeline files (YAML)")
                ->required();
            app.add_flag("--strict", opts->strict,
                         "Treat warnings as failures");
            app.footer(
                "Prints FILE:LINE: error|warning: message for each problem, "
                "then one summary\n"
                "line per file. Exit 0 when every file is valid, 65 when one "
                "is refused.");
            return [opts] { return RunValidate(*opts); };
          }};
}

}  // namespace steps::cli
