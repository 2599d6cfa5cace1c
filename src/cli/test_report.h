// What `steps test` reports: one case per job (or per load check), its runs
// under --repeat and the verdict of each step assertion, written as lines
// and a table on the terminal, as JUnit XML and as JSON (docs/testing.md).
#ifndef STEPS_CLI_TEST_REPORT_H_
#define STEPS_CLI_TEST_REPORT_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "core/duration.h"
#include "pipeline/run_record.h"

namespace steps::cli {

// One check of one step, over the runs of its job: "review: contains_all".
struct AssertionTally {
  std::string step;   // The step's name (with its across cell, if any).
  std::string check;  // AssertionResult::name.
  int judged = 0;     // Runs in which the check was judged.
  int passed = 0;     // ... and held every time it was judged.
  std::string last_miss;  // The latest miss's detail; "" when none.
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
  // The job's runs (--repeat) and how many passed; 1 and 0/1 for a case
  // that is not a job.
  int runs = 1;
  int passes = 0;
  std::vector<AssertionTally> assertions;  // Step checks, in first-seen order.

  // "7/10"
  std::string Rate() const;
};

// Adds the step checks judged in one run of a job to `tallies`: each step
// record's last judged attempt, a check counted as passed in this run when
// every judgement of it (a step may run more than once) held.
void TallyAssertions(const pipeline::JobRecord& job,
                     std::vector<AssertionTally>& tallies);

// "check 'review: contains_all' passed 7/10: the output lacks ..." lines for
// every tally that missed at least once; "" when none did.
std::string DescribeFailedAssertions(const std::vector<AssertionTally>& t);

// The per-assertion table printed after the job lines; nothing when no case
// has step assertions.
void PrintAssertionTable(std::ostream& out,
                         const std::vector<CaseResult>& cases);

// JUnit XML: one testcase per case; a failed one holds one <failure> (or
// <error>) whose message is the reason and whose text lists the failed
// assertions, then that job's log. False when the file cannot be written.
bool WriteJunit(const std::string& path, const std::vector<CaseResult>& cases);

// The JSON of `steps test --json` (docs/testing.md).
std::string TestJson(const std::vector<CaseResult>& cases, int repeat,
                     double min_pass_rate);

}  // namespace steps::cli

#endif  // STEPS_CLI_TEST_REPORT_H_
