#include "cli/ci_report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/terminal_printer.h"
#include "core/utf8.h"

namespace steps::cli {
namespace {

// How many of the slowest steps the summary lists.
constexpr size_t kSlowestShown = 5;
// A failure's message is cut to this many bytes in a table or annotation.
constexpr size_t kMessageBytes = 300;

bool IsContainer(pipeline::StepKind k) {
  return k == pipeline::StepKind::kInParallel || k == pipeline::StepKind::kDo ||
         k == pipeline::StepKind::kTry || k == pipeline::StepKind::kAcross;
}

// One line of text fit for a Markdown table cell: valid UTF-8, no line
// breaks, pipes escaped, cut to kMessageBytes.
std::string Cell(const std::string& text) {
  std::string clean = SanitizeUtf8(text);
  if (clean.size() > kMessageBytes) {
    clean.resize(kMessageBytes);
    clean = SanitizeUtf8(clean) + "…";
  }
  std::string out;
  for (char c : clean) {
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Cost(double usd) {
  if (usd <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.4f", usd);
  return buf;
}

struct Totals {
  int steps = 0;
  int attempts = 0;
  int turns = 0;
  int64_t tokens = 0;
  double usd = 0;
};

Totals TotalsOf(const pipeline::JobRecord& job) {
  Totals t;
  for (const pipeline::StepRecord& s : job.steps) {
    if (IsContainer(s.ref.kind)) continue;
    ++t.steps;
    t.attempts += static_cast<int>(s.attempts.size());
    if (s.agent) {
      t.turns += s.agent->turns;
      t.tokens += s.agent->prompt_tokens + s.agent->completion_tokens;
      t.usd += s.agent->usd;
    }
  }
  return t;
}

bool Failing(const pipeline::StepRecord& s) {
  return !IsContainer(s.ref.kind) && (s.outcome == Outcome::kFailed ||
                                      s.outcome == Outcome::kErrored);
}

std::string Where(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

std::string ErrorCommand(const std::string& file, int line,
                         const std::string& title,
                         const std::string& message) {
  std::string out = "::error file=" + EscapeWorkflowText(file, true);
  if (line > 0) out += ",line=" + std::to_string(line);
  out += ",title=" + EscapeWorkflowText(title, true) +
         "::" + EscapeWorkflowText(message, false) + "\n";
  return out;
}

}  // namespace

void CiReport::AddRun(const pipeline::Pipeline& model,
                      const pipeline::RunRecord& record) {
  Run run{model.file, record, {}};
  for (const pipeline::Job& job : model.jobs)
    run.job_lines.emplace_back(job.name, job.line);
  runs_.push_back(std::move(run));
}

void CiReport::AddRefusal(const pipeline::Diagnostics& diagnostics) {
  Refusal r{diagnostics.file(), {}};
  for (const pipeline::Diagnostic& d : diagnostics.all()) {
    if (d.severity == pipeline::Severity::kError) r.errors.push_back(d);
  }
  refusals_.push_back(std::move(r));
}

int CiReport::JobLine(const Run& run, const std::string& job) const {
  for (const auto& [name, line] : run.job_lines)
    if (name == job) return line;
  return 0;
}

void CiReport::JobsTable(std::string& out) const {
  out += "| Job | Outcome | Time | Steps | Attempts | Turns | Tokens | Cost |\n"
         "|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const Run& run : runs_) {
    for (const pipeline::JobRecord& job : run.record.jobs) {
      Totals t = TotalsOf(job);
      std::string outcome(OutcomeName(job.outcome));
      if (job.outcome != Outcome::kSucceeded) outcome = "**" + outcome + "**";
      out += "| " + Cell(job.name) + " | " + outcome + " | " +
             FormatDuration(job.duration) + " | " + std::to_string(t.steps) +
             " | " + std::to_string(t.attempts) + " | " +
             std::to_string(t.turns) + " | " + std::to_string(t.tokens) +
             " | " + Cost(t.usd) + " |\n";
    }
  }
}

void CiReport::CasesTable(std::string& out) const {
  out += "| File | Job | Verdict | Time | Why |\n|---|---|---|---:|---|\n";
  for (const CiCase& c : cases_) {
    const char* verdict = c.skipped ? "skipped" : c.passed ? "passed"
                                                           : "**FAILED**";
    out += "| " + Cell(c.file) + " | " + Cell(c.job) + " | " + verdict +
           " | " + FormatDuration(c.duration) + " | " + Cell(c.reason) + " |\n";
  }
}

void CiReport::Failures(std::string& out) const {
  std::string items;
  for (const Refusal& r : refusals_) {
    for (const pipeline::Diagnostic& d : r.errors) {
      items += "- `" + Where(r.file, d.line) + "` refused at load: " +
               Cell(d.message) + "\n";
    }
  }
  for (const CiCase& c : cases_) {
    if (c.passed || c.skipped) continue;
    items += "- **" + Cell(c.job) + "** (`" + Where(c.file, c.line) +
             "`): " + Cell(c.reason) + "\n";
  }
  // Under `steps test` a step may fail on purpose: only verdicts count.
  const std::vector<Run> none;
  for (const Run& run : cases_.empty() ? runs_ : none) {
    for (const pipeline::JobRecord& job : run.record.jobs) {
      for (const pipeline::StepRecord& s : job.steps) {
        if (!Failing(s)) continue;
        items += "- **" + Cell(job.name) + " / " + Cell(StepName(s.ref)) + "** (`" +
                 Where(run.file, s.ref.line) + "`) " +
                 std::string(OutcomeName(s.outcome)) + ": " + Cell(s.error) +
                 "\n";
      }
    }
  }
  if (!items.empty()) out += "\n### Failures\n\n" + items;
}

void CiReport::SlowestSteps(std::string& out) const {
  struct Slow {
    const pipeline::StepRecord* step;
    const std::string* job;
  };
  std::vector<Slow> all;
  for (const Run& run : runs_) {
    for (const pipeline::JobRecord& job : run.record.jobs) {
      for (const pipeline::StepRecord& s : job.steps) {
        if (!IsContainer(s.ref.kind)) all.push_back({&s, &job.name});
      }
    }
  }
  if (all.empty()) return;
  std::stable_sort(all.begin(), all.end(), [](const Slow& a, const Slow& b) {
    return a.step->duration > b.step->duration;
  });
  if (all.size() > kSlowestShown) all.resize(kSlowestShown);
  out += "\n### Slowest steps\n\n| Step | Job | Outcome | Time | Attempts |\n"
         "|---|---|---|---:|---:|\n";
  for (const Slow& s : all) {
    out += "| " + Cell(StepName(s.step->ref)) + " | " + Cell(*s.job) + " | " +
           std::string(OutcomeName(s.step->outcome)) +
           (s.step->cached ? " (cached)" : "") + " | " +
           FormatDuration(s.step->duration) + " | " +
           std::to_string(s.step->attempts.size()) + " |\n";
  }
}

std::string CiReport::Markdown() const {
  int jobs = 0, bad = 0;
  for (const Run& run : runs_) {
    for (const pipeline::JobRecord& job : run.record.jobs) {
      ++jobs;
      bad += job.outcome != Outcome::kSucceeded;
    }
  }
  std::string out = "## `" + Cell(title_) + "`\n\n";
  if (!cases_.empty()) {
    int passed = 0, failed = 0, skipped = 0;
    for (const CiCase& c : cases_) {
      skipped += c.skipped;
      passed += !c.skipped && c.passed;
      failed += !c.skipped && !c.passed;
    }
    out += std::to_string(passed) + " passed, " + std::to_string(failed) +
           " failed" +
           (skipped ? ", " + std::to_string(skipped) + " skipped" : "") +
           ".\n\n";
    CasesTable(out);
  } else if (!runs_.empty()) {
    const pipeline::RunRecord& r = runs_.front().record;
    out += "Run `" + r.id + "`: " + std::to_string(jobs - bad) + " of " +
           std::to_string(jobs) + " jobs succeeded in " +
           FormatDuration(r.duration) + ".\n\n";
    JobsTable(out);
  } else if (!refusals_.empty()) {
    out += "The pipeline was refused at load.\n";
  }
  Failures(out);
  SlowestSteps(out);
  return out;
}

std::string CiReport::Annotations() const {
  std::string out;
  for (const Refusal& r : refusals_) {
    for (const pipeline::Diagnostic& d : r.errors)
      out += ErrorCommand(r.file, d.line, "steps: refused at load", d.message);
  }
  for (const CiCase& c : cases_) {
    if (c.passed || c.skipped) continue;
    out += ErrorCommand(c.file, c.line, "steps test: job " + c.job + " failed",
                        c.reason);
  }
  if (!cases_.empty()) return out;  // Judged: failing steps may be meant.
  for (const Run& run : runs_) {
    for (const pipeline::JobRecord& job : run.record.jobs) {
      bool any = false;
      for (const pipeline::StepRecord& s : job.steps) {
        if (!Failing(s)) continue;
        any = true;
        out += ErrorCommand(run.file, s.ref.line,
                            "steps: " + job.name + " / " + StepName(s.ref) + " " +
                                std::string(OutcomeName(s.outcome)),
                            Cell(s.error));
      }
      // A job that failed with no failing step (its deadline, a hook):
      // point at the job.
      if (!any && job.outcome != Outcome::kSucceeded) {
        out += ErrorCommand(run.file, JobLine(run, job.name),
                            "steps: job " + job.name + " " +
                                std::string(OutcomeName(job.outcome)),
                            Cell(job.error));
      }
    }
  }
  return out;
}

bool PublishCiReport(const CiReport& report, const std::string& summary_file) {
  bool ok = true;
  if (InGithubActions()) {
    std::fputs(report.Annotations().c_str(), stdout);
    std::fflush(stdout);
    const char* step_summary = std::getenv("GITHUB_STEP_SUMMARY");
    if (step_summary != nullptr && *step_summary != '\0') {
      if (Status s = AppendToFile(step_summary, report.Markdown()); !s.ok()) {
        std::fprintf(stderr, "steps: GITHUB_STEP_SUMMARY: %s\n",
                     s.message().c_str());
        ok = false;
      }
    }
  }
  if (!summary_file.empty()) {
    std::error_code ec;
    std::ofstream out(summary_file, std::ios::trunc | std::ios::binary);
    out << report.Markdown();
    out.flush();
    if (!out) {
      std::fprintf(stderr, "steps: --summary: cannot write %s\n",
                   summary_file.c_str());
      ok = false;
    }
  }
  return ok;
}

bool InGithubActions() {
  const char* v = std::getenv("GITHUB_ACTIONS");
  return v != nullptr && std::string(v) == "true";
}

Status AppendToFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (!out) return ErrnoStatus("cannot open " + path, errno);
  out << text;
  out.flush();
  if (!out) return ErrnoStatus("cannot write " + path, errno);
  return Status::Ok();
}

std::string EscapeWorkflowText(const std::string& text, bool property) {
  std::string out;
  for (char c : SanitizeUtf8(text)) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      case ':': out += property ? "%3A" : ":"; break;
      case ',': out += property ? "%2C" : ","; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace steps::cli
