// `steps test [FILE|DIR]... [--junit PATH] [--summary PATH]`: runs every job and judges it by
// its assert: block.
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/ci_report.h"
#include "cli/commands.h"
#include "cli/run_support.h"
#include "cli/terminal_printer.h"
#include "core/utf8.h"
#include "core/redact.h"
#include "pipeline/job_assert.h"
#include "pipeline/loader.h"
#include "pipeline/source_check.h"

namespace steps::cli {
namespace {

namespace fs = std::filesystem;

struct TestOptions {
  std::vector<std::string> paths;
  std::string junit;
  std::string summary;  // --summary FILE
  std::string state_dir;
  bool verbose = false;
};

struct CaseResult {
  CaseResult(std::string f, std::string n)
      : file(std::move(f)), name(std::move(n)) {}
  std::string file;
  std::string name;  // The job, or "(load)".
  enum { kPass, kFail, kSkip } verdict = kPass;
  std::string reason;
  std::string log;
  Millis duration{0};
  int line = 0;  // The job's line, or the first load error's.
  // A failed case whose job had a step that errored (the machinery broke):
  // JUnit's <error>, counted in `errors` rather than `failures`.
  bool errored = false;
};

// The value of a "# KEY: value" comment line at the top of a fixture.
std::string Header(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  const std::string prefix = "# " + key + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      std::string v = line.substr(prefix.size());
      return v.empty() ? " "
                       : v.substr(v.find_first_not_of(' ') == std::string::npos
                                      ? v.size()
                                      : v.find_first_not_of(' '));
    }
  }
  return "";
}

std::vector<std::string> CollectFiles(const std::vector<std::string>& paths,
                                      bool* missing) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec);
           !ec && it != fs::end(it); it.increment(ec)) {
        std::string ext = it->path().extension().string();
        if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml")) {
          found.push_back(it->path().string());
        }
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      std::cerr << "steps test: " << p << ": no such file or directory\n";
      *missing = true;
    }
  }
  return files;
}

// `text` as XML character data or an attribute value. Output is bytes until
// shown: invalid UTF-8 becomes U+FFFD, and the control characters XML 1.0
// cannot hold even as references are written visibly as \xNN, so a task that
// prints colour codes or binary still gives a well-formed file. Also the
// JUnit writer's mask: secret values (core/redact.h) never reach the XML,
// whatever the text came from.
std::string XmlEscape(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string s = RedactSecrets(text);
  std::string out;
  for (char c : SanitizeUtf8(s)) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if (byte < 0x20 && c != '\n' && c != '\t' && c != '\r') {
          out += "\\x";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  // U+FFFE and U+FFFF are valid UTF-8 but not XML characters.
  for (const char* bad : {"\xEF\xBF\xBE", "\xEF\xBF\xBF"}) {
    for (size_t at = out.find(bad); at != std::string::npos;
         at = out.find(bad, at)) {
      out.replace(at, 3, "\xEF\xBF\xBD");
    }
  }
  return out;
}

bool WriteJunit(const std::string& path, const std::vector<CaseResult>& cases) {
  int failures = 0, errors = 0, skipped = 0;
  double total = 0;
  for (const CaseResult& c : cases) {
    failures += c.verdict == CaseResult::kFail && !c.errored;
    errors += c.verdict == CaseResult::kFail && c.errored;
    skipped += c.verdict == CaseResult::kSkip;
    total += c.duration.count() / 1000.0;
  }
  std::ofstream out(path);
  if (!out) return false;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"steps test\" tests=\"" << cases.size()
      << "\" failures=\"" << failures << "\" errors=\"" << errors
      << "\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  out << "  <testsuite name=\"steps\" tests=\"" << cases.size()
      << "\" failures=\"" << failures << "\" errors=\"" << errors
      << "\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  for (const CaseResult& c : cases) {
    out << "    <testcase classname=\"" << XmlEscape(c.file) << "\" name=\""
        << XmlEscape(c.name) << "\" time=\"" << c.duration.count() / 1000.0
        << "\"";
    if (c.verdict == CaseResult::kPass) {
      out << "/>\n";
      continue;
    }
    out << ">\n";
    if (c.verdict == CaseResult::kSkip) {
      out << "      <skipped message=\"" << XmlEscape(c.reason) << "\"/>\n";
    } else {
      const char* tag = c.errored ? "error" : "failure";
      out << "      <" << tag << " message=\"" << XmlEscape(c.reason) << "\">"
          << XmlEscape(c.log) << "</" << tag << ">\n";
    }
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n</testsuites>\n";
  return static_cast<bool>(out);
}

// The lines of `log` that job `job` printed: from its "job NAME" line to
// its "job NAME OUTCOME in ..." line (jobs run one after another). The whole
// log when the job's lines are not found.
std::string JobLog(const std::string& log, const std::string& job) {
  const std::string start = "job " + job;
  std::istringstream lines(log);
  std::string line, out;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (!inside && (line == start || line.rfind(start + " (timeout", 0) == 0))
      inside = true;
    if (!inside) continue;
    out += line + "\n";
    for (const char* o : {" succeeded in ", " failed in ", " aborted in "}) {
      if (line.rfind(start + o, 0) == 0) return out;
    }
  }
  return out.empty() ? log : out;
}

// The mock's missed expectations, as one reason per job (by index) plus a
// last one for misses no job's step made. Jobs run one after another and
// requests are kept in order, so each miss belongs to the first job, from
// the one the previous miss went to, with a step of the request's name (a
// fixer's requests are named "TASK/fix").
std::vector<std::string> AttributeMockMisses(
    const std::vector<pipeline::JobRecord>& jobs,
    const std::vector<RunOutcome::MockMiss>& found) {
  std::vector<std::string> out(jobs.size() + 1);
  size_t cursor = 0;
  for (const RunOutcome::MockMiss& miss : found) {
    size_t at = jobs.size();
    for (size_t j = cursor; j < jobs.size() && at == jobs.size(); ++j) {
      for (const pipeline::StepRecord& s : jobs[j].steps) {
        if (s.ref.name == miss.step ||
            (!s.ref.fixer && s.ref.name + "/fix" == miss.step)) {
          at = j;
          break;
        }
      }
    }
    if (at < jobs.size()) cursor = at;
    std::string& reason = out[at];
    reason += (reason.empty() ? "" : "; ");
    if (at < jobs.size()) reason += "step '" + miss.step + "': ";
    reason += "mock expectation missed: " + miss.problem;
  }
  return out;
}

bool HasErroredStep(const pipeline::JobRecord& job) {
  for (const pipeline::StepRecord& s : job.steps) {
    if (s.outcome == Outcome::kErrored) return true;
  }
  return false;
}

// The "# expect-warning: TEXT" and "# expect-strict: TEXT" headers of a file
// that loaded: a warning containing TEXT was given, or `steps validate
// --strict` would fail the file with TEXT (e.g. "Valid: w (1 step) — 1
// warning; failing due to --strict"). nullopt for a file with neither.
std::optional<CaseResult> JudgeLoadWarnings(const std::string& file,
                                            const pipeline::LoadResult& r) {
  const std::string warning = Header(file, "expect-warning");
  const std::string strict = Header(file, "expect-strict");
  if (warning.empty() && strict.empty()) return std::nullopt;
  CaseResult c{file, "(load warnings)"};
  const int warnings = r.diagnostics.warning_count();
  if (!warning.empty()) {
    bool found = false;
    for (const pipeline::Diagnostic& d : r.diagnostics.all()) {
      found |= d.severity == pipeline::Severity::kWarning &&
               d.message.find(warning) != std::string::npos;
    }
    if (!found) c.reason = "no warning says: " + warning;
  }
  if (!strict.empty()) {
    int steps = 0;
    for (const pipeline::Job& job : r.pipeline->jobs)
      steps += pipeline::CountSteps(job.plan);
    const std::string summary =
        ValidSummary(fs::path(file).stem().string(), steps, warnings, true);
    if (warnings == 0 || summary.find(strict) == std::string::npos) {
      if (!c.reason.empty()) c.reason += "; ";
      c.reason += "validate --strict says \"" + summary + "\"" +
                  (warnings ? "" : " and passes") + ", expected it to fail "
                  "with: " + strict;
    }
  }
  if (!c.reason.empty()) {
    c.verdict = CaseResult::kFail;
    c.log = r.diagnostics.FormatAll();
  }
  return c;
}

// Runs one fixture file; appends one case per job (or one for the file).
// The line of the first error in `d`, or 0.
int FirstErrorLine(const pipeline::Diagnostics& d) {
  for (const pipeline::Diagnostic& x : d.all())
    if (x.severity == pipeline::Severity::kError) return x.line;
  return 0;
}

void TestFile(const std::string& file, const std::string& state_dir,
              std::vector<CaseResult>& cases, CiReport& report) {
  const std::string refused = Header(file, "expect-refused");
  const std::string skip = Header(file, "steps-test");
  SteadyTime start = RealClock().Now();
  pipeline::LoadResult r = pipeline::LoadPipelineFile(file);
  auto elapsed = [&] {
    return std::chrono::duration_cast<Millis>(RealClock().Now() - start);
  };
  if (!refused.empty()) {
    CaseResult c{file, "(refused at load)"};
    bool found = false;
    for (const pipeline::Diagnostic& d : r.diagnostics.all()) {
      if (d.severity == pipeline::Severity::kError &&
          d.message.find(refused) != std::string::npos) {
        found = true;
      }
    }
    if (r.pipeline || !found) {
      c.verdict = CaseResult::kFail;
      c.reason = r.pipeline
                     ? "loaded, but should be refused with: " + refused
                     : "refused, but without the expected message: " + refused;
      c.log = r.diagnostics.FormatAll();
    }
    c.duration = elapsed();
    cases.push_back(c);
    return;
  }
  if (skip.rfind("skip", 0) == 0) {
    CaseResult c{file, "(file)"};
    c.verdict = CaseResult::kSkip;
    c.reason = skip;
    cases.push_back(c);
    return;
  }
  if (!r.pipeline) {
    CaseResult c{file, "(load)"};
    c.verdict = CaseResult::kFail;
    c.reason = "the pipeline was refused at load";
    c.line = FirstErrorLine(r.diagnostics);
    c.log = r.diagnostics.FormatAll();
    c.duration = elapsed();
    cases.push_back(c);
    return;
  }
  if (std::optional<CaseResult> c = JudgeLoadWarnings(file, r)) {
    c->duration = elapsed();
    cases.push_back(*c);
  }
  pipeline::ResolvedPlan plan(r.pipeline);
  // Without a mock: block the sources run as written: each must be
  // servable here before the first step runs.
  if (!r.pipeline->mock) {
    auto problems = pipeline::CheckSourceEnvironment(
        plan, {}, pipeline::ProcessEnvLookup());
    if (!problems.empty()) {
      CaseResult c{file, "(environment)"};
      c.verdict = CaseResult::kFail;
      c.reason = "refused before the first step: " + problems[0].message;
      for (const pipeline::SourceProblem& p : problems) {
        r.diagnostics.Error(p.line, p.message);
      }
      c.log = r.diagnostics.FormatAll();
      c.duration = elapsed();
      cases.push_back(c);
      return;
    }
  }
  char* buf = nullptr;
  size_t len = 0;
  FILE* mem = open_memstream(&buf, &len);
  RunOutcome outcome;
  {
    TerminalPrinter printer(mem, false, RealClock());
    RunSetup setup;
    setup.state_dir = state_dir;
    setup.mock = r.pipeline->mock.has_value();
    setup.observer = &printer;
    outcome = RunPlan(plan, setup);
  }
  std::fclose(mem);
  std::string log(buf, len);
  free(buf);
  report.AddRun(*r.pipeline, outcome.record);
  const std::vector<std::string> misses =
      AttributeMockMisses(outcome.record.jobs, outcome.mock_misses);
  for (size_t i = 0; i < outcome.record.jobs.size(); ++i) {
    const pipeline::JobRecord& job = outcome.record.jobs[i];
    CaseResult c{file, job.name};
    c.duration = job.duration;
    const pipeline::Job* model = r.pipeline->FindJob(job.name);
    c.line = model->line;
    std::optional<std::string> why = pipeline::JudgeJob(*model, job);
    if (why || !misses[i].empty()) {
      c.verdict = CaseResult::kFail;
      c.reason = why.value_or("");
      if (!misses[i].empty())
        c.reason += (c.reason.empty() ? "" : "; ") + misses[i];
      c.log = JobLog(log, job.name);
      c.errored = HasErroredStep(job);
    }
    cases.push_back(c);
  }
  if (!misses.back().empty()) {
    CaseResult c{file, "(mock expectations)"};
    c.verdict = CaseResult::kFail;
    c.reason = misses.back();
    c.log = log;
    cases.push_back(c);
  }
}

int RunTest(const TestOptions& opts) {
  std::vector<std::string> paths = opts.paths;
  if (paths.empty()) {
    std::error_code ec;
    if (!fs::is_directory("fixtures", ec)) {
      std::cerr << "steps test: no FILE or DIR given, and no fixtures/ "
                   "folder in "
                << fs::current_path(ec).string()
                << " to look in by default; pass pipeline files or folders "
                   "(`steps init` writes a first one)\n";
      return kExitUsage;
    }
    paths.push_back("fixtures");
  }
  bool missing = false;
  std::vector<std::string> files = CollectFiles(paths, &missing);
  if (missing) return kExitUsage;
  std::string state_dir = opts.state_dir;
  bool temporary = state_dir.empty();
  if (temporary) {
    std::string tmpl =
        (fs::temp_directory_path() / "steps-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      std::cerr << "steps test: cannot create a temporary state folder\n";
      return kExitJobFailed;
    }
    state_dir = tmpl;
  }
  std::vector<CaseResult> cases;
  std::string title = "steps test";
  for (const std::string& p : opts.paths) title += " " + p;
  CiReport report(title);
  for (const std::string& file : files) {
    size_t first = cases.size();
    TestFile(file, state_dir, cases, report);
    for (size_t i = first; i < cases.size(); ++i) {
      const CaseResult& c = cases[i];
      const char* tag = c.verdict == CaseResult::kPass   ? "PASS"
                        : c.verdict == CaseResult::kSkip ? "SKIP"
                                                         : "FAIL";
      std::cout << tag << "  " << c.file << "  " << c.name << "  ("
                << FormatDuration(c.duration) << ")";
      if (c.verdict != CaseResult::kPass) std::cout << ": " << c.reason;
      std::cout << "\n";
      if (c.verdict == CaseResult::kFail || (opts.verbose && !c.log.empty())) {
        std::istringstream lines(c.log);
        std::string line;
        while (std::getline(lines, line)) std::cout << "      " << line << "\n";
      }
    }
    std::cout.flush();
  }
  int passed = 0, failed = 0, skipped = 0;
  for (const CaseResult& c : cases) {
    passed += c.verdict == CaseResult::kPass;
    failed += c.verdict == CaseResult::kFail;
    skipped += c.verdict == CaseResult::kSkip;
  }
  if (temporary) {
    std::error_code ec;
    fs::remove_all(state_dir, ec);
  }
  for (const CaseResult& c : cases) {
    report.AddCase({c.file, c.name, c.line, c.verdict != CaseResult::kFail,
                    c.verdict == CaseResult::kSkip, c.reason, c.duration});
  }
  PublishCiReport(report, opts.summary);
  if (!opts.junit.empty() && !WriteJunit(opts.junit, cases)) {
    std::cerr << "steps test: cannot write " << opts.junit << "\n";
    return kExitJobFailed;
  }
  std::cout << passed << " passed, " << failed << " failed";
  if (skipped) std::cout << ", " << skipped << " skipped";
  std::cout << "\n";
  return failed == 0 && !cases.empty() ? kExitOk : kExitJobFailed;
}

}  // namespace

Command TestCommand() {
  return {
      "test", "Run fixture pipelines and judge each job by its assert: block",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<TestOptions>();
        app.add_option("paths", opts->paths,
                       "Files or folders (default: fixtures)");
        app.add_option("--junit", opts->junit,
                       "Also write JUnit XML to this file");
        app.add_option("--summary", opts->summary,
                       "Also write a Markdown summary to this file (under "
                       "GitHub Actions it also goes to $GITHUB_STEP_SUMMARY)");
        app.add_option("--state-dir", opts->state_dir,
                       "Keep run folders here (default: a temporary folder, "
                       "removed after)");
        app.add_flag("-v,--verbose", opts->verbose,
                     "Print every job's log, not only failures'");
        app.footer(
            "A job passes when its assert: block holds (execution in order, "
            "outcome, steps:\n"
            "each step's attempts, waits, errors ...) and no request its "
            "steps sent\nmissed a mock expect:; or, "
            "without one, when it succeeds. A file whose header says\n"
            "  # expect-refused: MESSAGE\n"
            "passes when loading refuses it with that message; one whose "
            "header says\n"
            "  # expect-warning: MESSAGE   or   # expect-strict: SUMMARY\n"
            "gets a '(load warnings)' case that passes when loading warns "
            "with MESSAGE, or\n"
            "when 'steps validate --strict' fails it with SUMMARY; its jobs "
            "run as usual.\n"
            "A file with a mock: block\n"
            "has every agent source served in-process by the mock provider.\n"
            "Prints one line per job and closes with 'N passed, N failed'. "
            "Exit 0 when all\n"
            "passed, 1 otherwise.");
        return [opts] { return RunTest(*opts); };
      }};
}

}  // namespace steps::cli
