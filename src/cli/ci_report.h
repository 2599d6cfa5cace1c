// At home in CI: a Markdown summary of what `steps run` or `steps test` did
// (for $GITHUB_STEP_SUMMARY or `--summary FILE`) and, under GitHub Actions,
// workflow annotations (`::error file=…,line=…::…`) that point at the
// pipeline line of each failing step. See docs/ci.md.
#ifndef STEPS_CLI_CI_REPORT_H_
#define STEPS_CLI_CI_REPORT_H_

#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "pipeline/diagnostics.h"
#include "pipeline/model.h"
#include "pipeline/run_record.h"

namespace steps::cli {

// One judged job of `steps test`.
struct CiCase {
  std::string file;
  std::string job;
  int line = 0;  // The job's line (0: the file as a whole).
  bool passed = true;
  bool skipped = false;
  std::string reason;  // Why it failed or was skipped.
  Millis duration{0};
};

// Collects runs (and, for `steps test`, verdicts) and renders them.
class CiReport {
 public:
  // `title`: the command as typed, e.g. "steps run p.yaml".
  explicit CiReport(std::string title) : title_(std::move(title)) {}

  // A finished run of the pipeline `model` (whose file names the lines).
  void AddRun(const pipeline::Pipeline& model,
              const pipeline::RunRecord& record);
  // A file refused at load: its errors become annotations.
  void AddRefusal(const pipeline::Diagnostics& diagnostics);
  void AddCase(CiCase c) { cases_.push_back(std::move(c)); }

  // The summary: a headline, a table of jobs (or of judged cases), the
  // failures with their lines, and the slowest steps.
  std::string Markdown() const;
  // GitHub workflow commands, one per line: an error for each failing step
  // (or failing case, or load error) at its pipeline line.
  std::string Annotations() const;

 private:
  struct Run {
    std::string file;
    pipeline::RunRecord record;
    std::vector<std::pair<std::string, int>> job_lines;
  };
  struct Refusal {
    std::string file;
    std::vector<pipeline::Diagnostic> errors;
  };
  int JobLine(const Run& run, const std::string& job) const;
  void JobsTable(std::string& out) const;
  void CasesTable(std::string& out) const;
  void Failures(std::string& out) const;
  void SlowestSteps(std::string& out) const;

  std::string title_;
  std::vector<Run> runs_;
  std::vector<Refusal> refusals_;
  std::vector<CiCase> cases_;
};

// Under GitHub Actions, prints the annotations on standard output and
// appends the summary to $GITHUB_STEP_SUMMARY (when set); with a non-empty
// `summary_file`, writes the summary there too (replacing the file). A file
// that cannot be written is said on standard error; false then.
bool PublishCiReport(const CiReport& report, const std::string& summary_file);

// True under GitHub Actions (GITHUB_ACTIONS=true).
bool InGithubActions();

// Appends `text` to the file at `path` (created if missing).
Status AppendToFile(const std::string& path, const std::string& text);

// Escapes for a workflow command's message (`%`, CR, LF) and, with
// `property`, also for a property value (`:` and `,`).
std::string EscapeWorkflowText(const std::string& text, bool property);

}  // namespace steps::cli

#endif  // STEPS_CLI_CI_REPORT_H_
