// Hooks and records through `steps run`, `steps show` and `steps validate`
// as a user types them: hooks of every shape run to the end after the job's
// deadline, bounded by their own timeouts; a job's hooks follow its outcome;
// every step kept from starting has a record that says why.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";

class HooksCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-hooks-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }

  struct Result {
    int exit_code = -1;
    std::string output;
  };

  // Runs steps in the temporary folder, stdout+stderr captured (stdout
  // alone with `stdout_only`). A run that hangs is killed after 120 s so
  // the suite reports it instead of hanging.
  Result Steps(const std::string& args, bool stdout_only = false) {
    std::string cmd = "cd '" + dir_ + "' && timeout -s KILL 120 '" + kSteps +
                      "' " + args + (stdout_only ? " 2>/dev/null" : " 2>&1");
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
      r.output.append(buf.data(), n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  // The steps of the last run's first job, as `steps show --json` gives them.
  nlohmann::json ShownSteps() {
    Result shown = Steps("show --json", true);
    EXPECT_EQ(shown.exit_code, 0) << shown.output;
    nlohmann::json run = nlohmann::json::parse(shown.output, nullptr, false);
    if (run.is_discarded() || run["jobs"].empty()) {
      ADD_FAILURE() << "no run in: " << shown.output;
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

  std::string dir_;
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "quick | quick ran")) << r.output;
  EXPECT_TRUE(Has(r.output, "STEP_TIMEOUT: Step 'stuck' timed out after 300ms"))
      << r.output;
  EXPECT_TRUE(Has(r.output, "tidy | tidy ran")) << r.output;
  EXPECT_FALSE(Has(r.output, "must not run")) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "task: never not started: job 'j' passed its timeout of "
                  "200ms\n"))
      << r.output;
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
  EXPECT_EQ(explained.exit_code, 0) << explained.output;
  EXPECT_TRUE(Has(explained.output,
                  "checked between steps, never during one; hooks run past "
                  "it, each bounded by its own timeout"))
      << explained.output;
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
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Has(r.output, "page | job on_failure")) << r.output;
  EXPECT_FALSE(Has(r.output, "job on_error")) << r.output;

  Result v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_TRUE(Has(v.output,
                  "p.yaml:7: warning: job 'j': a job-level 'on_error' never "
                  "fires"))
      << v.output;
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
  EXPECT_EQ(step.exit_code, 0) << step.output;
  EXPECT_FALSE(Has(step.output, "warning")) << step.output;
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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(Has(r.output, "must not run")) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "task: later not started: fail_fast: sibling 'bad' failed\n"))
      << r.output;
  EXPECT_TRUE(Has(r.output,
                  "do: do not started: fail_fast: sibling 'bad' failed\n"))
      << r.output;

  Result shown = Steps("show");
  EXPECT_TRUE(Has(shown.output,
                  "2. later\n     not started: fail_fast: sibling 'bad' "
                  "failed\n"))
      << shown.output;
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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "task: build [os=b] not started: fail_fast: sibling "
                  "cell os=a failed\n"))
      << r.output;
  EXPECT_TRUE(Has(r.output,
                  "task: next not started: job 'branches' passed its timeout "
                  "of 200ms\n"))
      << r.output;
  EXPECT_FALSE(Has(r.output, "must not run")) << r.output;
}

}  // namespace
