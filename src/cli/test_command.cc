// `steps test [FILE|DIR]... [--junit PATH] [--summary PATH]`: runs every job and judges it by
// its assert: block.
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/ci_report.h"
#include "cli/commands.h"
#include "cli/prices_file.h"
#include "cli/run_support.h"
#include "cli/runner_option.h"
#include "cli/terminal_printer.h"
#include "cli/test_report.h"
#include "core/redact.h"
#include "core/utf8.h"
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
  bool json = false;  // --json: the results as JSON on stdout, no lines.
  int repeat = 1;     // --repeat N: each file's jobs run N times.
  // --min-pass-rate as written ("0.7", "70%"); empty: every run must pass.
  std::string min_pass_rate_text;
  std::optional<double> min_pass_rate;  // Parsed, 0..1.
  std::string prices_path;              // --prices FILE (STEPS_PRICES).
  std::string runner;                   // --runner (STEPS_RUNNER).
  std::shared_ptr<const agent::PriceTable> prices;  // Loaded from it.
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
        // NAME.mock.yaml is a mock script (steps run --record), not a
        // pipeline: the pipeline that names it runs it.
        std::string stem_ext = it->path().stem().extension().string();
        if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml") &&
            stem_ext != ".mock") {
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
            (!s.ref.fixer && s.ref.name + "/fix" == miss.step) ||
            s.ref.name + "/judge" == miss.step) {
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

// Runs every job of `plan` once; `log` gets what the terminal printer wrote.
RunOutcome RunOnce(const pipeline::ResolvedPlan& plan, bool mock,
                   const std::string& state_dir,
                   const std::shared_ptr<const agent::PriceTable>& prices,
                   std::string& log) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* mem = open_memstream(&buf, &len);
  RunOutcome outcome;
  {
    TerminalPrinter printer(mem, false, RealClock());
    RunSetup setup;
    setup.state_dir = state_dir;
    setup.mock = mock;
    setup.prices = prices;
    setup.observer = &printer;
    outcome = RunPlan(plan, setup);
  }
  std::fclose(mem);
  log.assign(buf, len);
  free(buf);
  return outcome;
}

// After a missed expectation of a script read from `mock: {file:}`: how to
// record it again when the change that made it miss was meant.
std::string RerecordHint(const std::string& file,
                         const pipeline::Pipeline& pipeline) {
  if (pipeline.mock_file.empty()) return "";
  return "; if the change is intended, record the script again: steps run " +
         file + " --record " + pipeline.mock_file + " --record-overwrite";
}

// Whether a failure came from a conversation that asked for more than its
// mock script holds (mock_provider: "nothing scripted ...").
bool RanPastTheScript(const std::string& reason) {
  return reason.find("mock: nothing scripted for agent") != std::string::npos;
}

// Whether `passes` of `runs` is enough: at least `rate` of them, or all
// when no rate is given.
bool EnoughPasses(int passes, int runs, std::optional<double> rate) {
  if (!rate) return passes == runs;
  return static_cast<double>(passes) + 1e-9 >= *rate * runs;
}

// Runs the file's jobs `opts.repeat` times (never from the step cache) and
// appends one case per job, judged by its pass rate, plus one for mock
// expectations no job's step missed.
void RunJobs(const std::string& file, const pipeline::Pipeline& pipeline,
             const pipeline::ResolvedPlan& plan, const std::string& state_dir,
             const TestOptions& opts, std::vector<CaseResult>& cases,
             CiReport& report) {
  std::vector<CaseResult> jobs;
  CaseResult stray{file, "(mock expectations)"};
  for (int run = 0; run < opts.repeat; ++run) {
    std::string log;
    RunOutcome outcome =
        RunOnce(plan, pipeline.mock.has_value(), state_dir, opts.prices, log);
    report.AddRun(pipeline, outcome.record);
    const std::vector<std::string> misses =
        AttributeMockMisses(outcome.record.jobs, outcome.mock_misses);
    for (size_t i = 0; i < outcome.record.jobs.size(); ++i) {
      const pipeline::JobRecord& job = outcome.record.jobs[i];
      auto c = std::find_if(jobs.begin(), jobs.end(), [&](const CaseResult& x) {
        return x.name == job.name;
      });
      if (c == jobs.end()) {
        jobs.emplace_back(file, job.name);
        c = jobs.end() - 1;
        c->line = pipeline.FindJob(job.name)->line;
        c->runs = 0;
      }
      ++c->runs;
      c->duration += job.duration;
      TallyAssertions(job, c->assertions);
      std::optional<std::string> why =
          pipeline::JudgeJob(*pipeline.FindJob(job.name), job);
      if (!why && misses[i].empty()) {
        ++c->passes;
        continue;
      }
      c->reason = why.value_or("");
      if (misses[i].empty() && RanPastTheScript(c->reason)) {
        c->reason += RerecordHint(file, pipeline);
      }
      if (!misses[i].empty()) {
        c->reason += (c->reason.empty() ? "" : "; ") + misses[i] +
                     RerecordHint(file, pipeline);
      }
      c->log = JobLog(log, job.name);
      c->errored |= HasErroredStep(job);
    }
    if (!misses.back().empty()) {
      stray.verdict = CaseResult::kFail;
      stray.reason = misses.back() + RerecordHint(file, pipeline);
      stray.log = log;
    }
  }
  for (CaseResult& c : jobs) {
    const bool enough = EnoughPasses(c.passes, c.runs, opts.min_pass_rate);
    c.verdict = enough ? CaseResult::kPass : CaseResult::kFail;
    if (opts.repeat > 1 && c.passes < c.runs) {
      c.reason = "passed " + c.Rate() + " runs" +
                 (enough ? "" : ", below the minimum of " +
                                    (opts.min_pass_rate
                                         ? opts.min_pass_rate_text
                                         : std::string("every run"))) +
                 "; last failure: " + c.reason;
    }
    if (enough) c.errored = false;
    cases.push_back(std::move(c));
  }
  if (stray.verdict == CaseResult::kFail) cases.push_back(std::move(stray));
}

void TestFile(const std::string& file, const std::string& state_dir,
              const TestOptions& opts, std::vector<CaseResult>& cases,
              CiReport& report) {
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
  pipeline::ResolvedPlan plan(r.pipeline, PlanOptionsFor(opts.runner));
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
  RunJobs(file, *r.pipeline, plan, state_dir, opts, cases, report);
}

// "0.7" or "70%" as a rate from 0 to 1; nullopt when it is neither.
std::optional<double> ParseRate(const std::string& text) {
  std::string number = text;
  double scale = 1;
  if (!number.empty() && number.back() == '%') {
    number.pop_back();
    scale = 100;
  }
  if (number.empty() || number.size() > 20 ||
      number.find_first_not_of("0123456789.") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end) / scale;
  if (end != number.c_str() + number.size() || v < 0 || v > 1)
    return std::nullopt;
  return v;
}

void PrintCase(const CaseResult& c, bool verbose) {
  const char* tag = c.verdict == CaseResult::kPass   ? "PASS"
                    : c.verdict == CaseResult::kSkip ? "SKIP"
                                                     : "FAIL";
  std::cout << tag << "  " << c.file << "  " << c.name << "  ("
            << FormatDuration(c.duration) << ")";
  if (c.runs > 1) std::cout << "  [" << c.Rate() << " runs passed]";
  if (c.verdict != CaseResult::kPass) std::cout << ": " << c.reason;
  std::cout << "\n";
  if (c.verdict == CaseResult::kFail || (verbose && !c.log.empty())) {
    std::istringstream lines(c.log);
    std::string line;
    while (std::getline(lines, line)) std::cout << "      " << line << "\n";
  }
}

int RunTest(TestOptions opts) {
  if (opts.repeat < 1) {
    std::cerr << "steps test: --repeat must be 1 or more (got "
              << opts.repeat << ")\n";
    return kExitUsage;
  }
  if (!opts.min_pass_rate_text.empty()) {
    opts.min_pass_rate = ParseRate(opts.min_pass_rate_text);
    if (!opts.min_pass_rate) {
      std::cerr << "steps test: --min-pass-rate must be a rate from 0 to 1 "
                   "or a percentage from 0% to 100% (got '"
                << opts.min_pass_rate_text << "')\n";
      return kExitUsage;
    }
  }
  if (Result<std::shared_ptr<const agent::PriceTable>> prices =
          LoadPrices(opts.prices_path);
      prices.ok()) {
    opts.prices = *prices;
  } else {
    std::cerr << "steps test: --prices " << prices.status().message() << "\n";
    return kExitUsage;
  }
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
    TestFile(file, state_dir, opts, cases, report);
    if (!opts.json) {
      for (size_t i = first; i < cases.size(); ++i)
        PrintCase(cases[i], opts.verbose);
      std::cout.flush();
    }
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
  if (opts.json) {
    std::cout << TestJson(cases, opts.repeat, opts.min_pass_rate.value_or(1))
              << "\n";
    return failed == 0 && !cases.empty() ? kExitOk : kExitJobFailed;
  }
  PrintAssertionTable(std::cout, cases);
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
                       "Files or folders (default: fixtures); in a folder, "
                       "every *.yaml but *.mock.yaml (mock scripts)");
        AddRunnerOption(app, opts->runner);
        app.add_option("--prices", opts->prices_path, kPricesHelp)
            ->envname("STEPS_PRICES")
            ->type_name("FILE");
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
        app.add_flag("--json", opts->json,
                     "Print the results as JSON instead of lines "
                     "(docs/testing.md)");
        app.add_option("--repeat", opts->repeat,
                       "Run each file's jobs N times (never from the step "
                       "cache) and report pass rates");
        app.add_option("--min-pass-rate", opts->min_pass_rate_text,
                       "With --repeat: a job passes when at least this share "
                       "of its runs passed (0..1 or a percentage; default: "
                       "every run)");
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
            "Prints one line per job, a table of the step assertions, and "
            "closes with\n'N passed, N failed'. "
            "Exit 0 when all\n"
            "passed, 1 otherwise.");
        return [opts] { return RunTest(*opts); };
      }};
}

}  // namespace steps::cli
