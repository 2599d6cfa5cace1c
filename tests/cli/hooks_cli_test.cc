// Hooks and records through `steps run`, `steps show` and `steps validate`
// as a user types them: hooks of every shape run to the end after the job's
// deadline, bounded by their own timeouts; a job's hooks follow its outcome;
// every step kept from starting has a record that says why.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace test_support = steps::test_support;
using Result = test_support::CliResult;
using test_support::Has;

class HooksCliTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    dir_.Write(name, text);
  }

  // Runs steps in the temporary folder, stdout+stderr captured (stdout
  // alone with `stdout_only`). A run that hangs is killed after 120 s so
  // the suite reports it instead of hanging.
  Result Steps(const std::string& args, bool stdout_only = false) {
    test_support::StepsOptions options;
    if (stdout_only) options.streams = test_support::Streams::kStdoutOnly;
    options.kill_after = std::chrono::seconds(120);
    return test_support::RunSteps(dir_.path(), args, options);
  }

  // The steps of the last run's first job, as `steps show --json` gives them.
  nlohmann::json ShownSteps() {
    Result shown = Steps("show --json", true);
    EXPECT_EQ(shown.exit_code, 0) << shown.out;
    nlohmann::json run = nlohmann::json::parse(shown.out, nullptr, false);
    if (run.is_discarded() || run["jobs"].empty()) {
      ADD_FAILURE() << "no run in: " << shown.out;
      return nlohmann::json::array();
    }
    return run["jobs"][0]["steps"];
  }

  // The shown step named `name`; null when there is none.
  static nlohmann::json Named(const nlohmann::json& steps,
                              const std::string& name) {
    for (const nlohmann::json& s : steps) {
      if (s["name"] == name) return s;
    }
    return nullptr;
  }

  test_support::TempDir dir_;
};

// After the job's deadline every hook runs, a step inside a `do:` hook
// included; a hook step is bounded by its own timeout, not cut short by
// the deadline that already passed.
TEST_F(HooksCliTest, HooksRunAfterTheJobDeadlineBoundedByTheirOwnTimeout) {
  Write("p.yaml", R"(jobs:
- name: j
  timeout: 200ms
  on_failure:
    do:
    - { task: quick, run: echo quick ran }
    - { task: stuck, timeout: 300ms, run: sleep 30 }
  ensure:
    in_parallel:
    - { task: tidy, run: echo tidy ran }
  plan:
  - { task: slow, run: sleep 0.5 }
  - { task: never, run: echo must not run }
)");
  auto start = std::chrono::steady_clock::now();
  Result r = Steps("run p.yaml --plain --no-cache");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "quick | quick ran")) << r.out;
  EXPECT_TRUE(Has(r.out, "STEP_TIMEOUT: Step 'stuck' timed out after 300ms"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "tidy | tidy ran")) << r.out;
  EXPECT_FALSE(Has(r.out, "must not run")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "task: never not started: job 'j' passed its timeout of "
                  "200ms\n"))
      << r.out;
  EXPECT_LT(took, std::chrono::seconds(20)) << "stuck was not cut at 300ms";

  nlohmann::json steps = ShownSteps();
  nlohmann::json never = Named(steps, "never");
  ASSERT_FALSE(never.is_null()) << steps.dump(2);
  EXPECT_EQ(never["outcome"], "not started");
  EXPECT_EQ(never["error"], "job 'j' passed its timeout of 200ms");
  for (const char* ran : {"slow", "quick", "tidy"}) {
    ASSERT_FALSE(Named(steps, ran).is_null()) << ran << steps.dump(2);
    EXPECT_EQ(Named(steps, ran)["outcome"], "succeeded") << ran;
  }
  EXPECT_EQ(Named(steps, "stuck")["outcome"], "failed");

  Result explained = Steps("explain p.yaml");
  EXPECT_EQ(explained.exit_code, 0) << explained.out;
  EXPECT_TRUE(Has(explained.out,
                  "checked between steps, never during one; hooks run past "
                  "it, each bounded by its own timeout"))
      << explained.out;
}

// A job whose step errored ends failed, so the job's on_failure fires, not
// its on_error; `steps run` still exits 2, and `steps validate` warns that
// a job-level on_error never fires.
TEST_F(HooksCliTest, JobHooksFollowTheJobsOutcome) {
  Write("p.yaml", R"(agents:
- name: reviewer
  source: { model: mock/reviewer }
jobs:
- name: j
  on_failure: { task: page, run: echo job on_failure }
  on_error: { task: wrong, run: echo job on_error }
  plan:
  - agent: reviewer
    messages: ["Review the PR."]
    attempts: 1
mock:
  default: { status: 500, body: '{"error": {"message": "internal error"}}' }
)");
  Result r = Steps("run p.yaml --plain --mock --no-cache");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "page | job on_failure")) << r.out;
  EXPECT_FALSE(Has(r.out, "job on_error")) << r.out;

  Result v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_TRUE(Has(v.out,
                  "p.yaml:7: warning: job 'j': a job-level 'on_error' never "
                  "fires"))
      << v.out;
  EXPECT_NE(Steps("validate --strict p.yaml").exit_code, 0);
  // A step's on_error stays: a step does end errored.
  Write("step.yaml", R"(jobs:
- name: j
  plan:
  - task: t
    run: "true"
    on_error: { task: page, run: echo paged }
)");
  Result step = Steps("validate step.yaml");
  EXPECT_EQ(step.exit_code, 0) << step.out;
  EXPECT_FALSE(Has(step.out, "warning")) << step.out;
}

// Under fail_fast the siblings that never started are recorded, with the
// sibling that stopped them, in the run's output and in `steps show`.
TEST_F(HooksCliTest, FailFastRecordsTheSiblingsThatNeverStarted) {
  Write("p.yaml", R"(jobs:
- name: j
  plan:
  - in_parallel:
      limit: 1
      fail_fast: true
      steps:
      - { task: bad, run: exit 3 }
      - { task: later, run: echo must not run }
      - do:
        - { task: inner, run: echo must not run }
)");
  Result r = Steps("run p.yaml --plain --no-cache");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(Has(r.out, "must not run")) << r.out;
  EXPECT_TRUE(
      Has(r.out, "task: later not started: fail_fast: sibling 'bad' failed\n"))
      << r.out;
  EXPECT_TRUE(
      Has(r.out, "do: do not started: fail_fast: sibling 'bad' failed\n"))
      << r.out;

  Result shown = Steps("show");
  EXPECT_TRUE(Has(shown.out,
                  "2. later\n     not started: fail_fast: sibling 'bad' "
                  "failed\n"))
      << shown.out;
  nlohmann::json steps = ShownSteps();
  nlohmann::json later = Named(steps, "later");
  ASSERT_FALSE(later.is_null()) << steps.dump(2);
  EXPECT_EQ(later["outcome"], "not started");
  EXPECT_EQ(later["error"], "fail_fast: sibling 'bad' failed");
  EXPECT_TRUE(later["attempts"].empty());
  EXPECT_FALSE(Named(steps, "do").is_null()) << steps.dump(2);
}

// An across cell that never started is recorded as its first step, named by
// its values, and so is a branch the job's deadline kept out of a fan-out.
TEST_F(HooksCliTest, UnadmittedCellsAndBranchesHaveRecords) {
  Write("p.yaml", R"(jobs:
- name: cells
  plan:
  - across:
    - var: os
      values: [a, b]
      max_in_flight: 1
    fail_fast: true
    do:
    - { task: build, run: "test {{ .os | shellquote }} != a" }
- name: branches
  timeout: 200ms
  plan:
  - in_parallel:
      limit: 1
      steps:
      - { task: slow, run: sleep 0.5 }
      - { task: next, run: echo must not run }
)");
  Result r = Steps("run p.yaml --plain --no-cache");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "task: build [os=b] not started: fail_fast: sibling "
                  "cell os=a failed\n"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "task: next not started: job 'branches' passed its timeout "
                  "of 200ms\n"))
      << r.out;
  EXPECT_FALSE(Has(r.out, "must not run")) << r.out;
}

}  // namespace
