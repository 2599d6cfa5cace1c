// `steps test` and `steps validate` as a user runs them, on the contract's
// finer points: which job a missed mock expectation fails, what JUnit puts in
// each testcase, the expect-warning / expect-strict headers, and what the
// loader refuses on ensure hooks and retry blocks.
#include <gtest/gtest.h>

#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace test_support = steps::test_support;
using Result = test_support::CliResult;
using test_support::Has;

class TestCommandTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    dir_.Write(name, text);
  }
  std::string Read(const std::string& name) { return dir_.Read(name); }

  // Runs steps with `args` in the temporary folder; stdout+stderr captured.
  Result Steps(const std::string& args) {
    return test_support::RunSteps(dir_.path(), args);
  }

  test_support::TempDir dir_;
};

// The text of the <testcase> element named `name`.
std::string Testcase(const std::string& xml, const std::string& name) {
  size_t at = xml.find("name=\"" + name + "\"");
  if (at == std::string::npos) return "";
  size_t end = xml.find("</testcase>", at);
  size_t self_closed = xml.find("/>", at);
  if (end == std::string::npos || self_closed < xml.find('>', at)) end = at;
  return xml.substr(at, end - at);
}

TEST_F(TestCommandTest, AMissedMockExpectationFailsTheJobWhoseStepMissed) {
  Write("expect.yaml", R"(agents:
- { name: a, source: { model: mock/a } }
- { name: b, source: { model: mock/b } }
jobs:
- name: first
  plan: [{ agent: a, messages: ["Hello there"] }]
- name: second
  plan: [{ agent: b, messages: ["Hello there"] }]
mock:
  a: [{ say: hi }]
  b:
  - expect: { last_contains: "something else" }
    say: hi
)");
  Result r = Steps("test expect.yaml --junit report.xml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "PASS  expect.yaml  first")) << r.out;
  EXPECT_TRUE(Has(r.out, "FAIL  expect.yaml  second")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "step 'b': mock expectation missed: line 12: "
                  "expect last_contains"))
      << r.out;
  EXPECT_FALSE(Has(r.out, "(mock expectations)")) << r.out;
  EXPECT_TRUE(Has(r.out, "\n1 passed, 1 failed\n")) << r.out;
  const std::string xml = Read("report.xml");
  EXPECT_TRUE(Has(Testcase(xml, "second"), "<failure message=\"step 'b'"))
      << xml;
  EXPECT_FALSE(Has(Testcase(xml, "first"), "<failure")) << xml;
}

TEST_F(TestCommandTest, JunitGivesEachTestcaseItsOwnLogAndCountsErrors) {
  Write("two.yaml", R"(agents:
- { name: reviewer, source: { model: mock/reviewer } }
jobs:
- name: one
  plan: [{ task: t, run: "echo MARK_ONE; exit 1" }]
  assert: { outcome: succeeded }
- name: two
  plan: [{ agent: reviewer, attempts: 1, messages: ["Review."] }]
  assert: { outcome: succeeded }
- name: three
  plan: [{ task: u, run: echo MARK_THREE }]
mock:
  reviewer:
  - status: 500
    body: '{"error": {"message": "internal error"}}'
)");
  Result r = Steps("test two.yaml --junit report.xml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string xml = Read("report.xml");
  EXPECT_TRUE(Has(xml,
                  "<testsuites name=\"steps test\" tests=\"3\" "
                  "failures=\"1\" errors=\"1\" skipped=\"0\""))
      << xml;
  EXPECT_TRUE(Has(xml,
                  "<testsuite name=\"steps\" tests=\"3\" failures=\"1\" "
                  "errors=\"1\" skipped=\"0\""))
      << xml;
  const std::string one = Testcase(xml, "one");
  EXPECT_TRUE(Has(one, "<failure message=")) << xml;
  EXPECT_TRUE(Has(one, "MARK_ONE")) << xml;
  EXPECT_FALSE(Has(one, "job two")) << xml;
  EXPECT_FALSE(Has(one, "MARK_THREE")) << xml;
  const std::string two = Testcase(xml, "two");
  EXPECT_TRUE(Has(two, "<error message=")) << xml;  // The provider broke.
  EXPECT_TRUE(Has(two, "job two")) << xml;
  EXPECT_FALSE(Has(two, "MARK_ONE")) << xml;
  EXPECT_FALSE(Has(two, "MARK_THREE")) << xml;
}

TEST_F(TestCommandTest, ExpectWarningHeaderIsHonoured) {
  const std::string header =
      "# expect-warning: declares 'retry' but no 'timeout'\n";
  Write("warns.yaml", header + R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo ok, retry: { max_attempts: 2 } }]
)");
  Result warns = Steps("test warns.yaml");
  EXPECT_EQ(warns.exit_code, 0) << warns.out;
  EXPECT_TRUE(Has(warns.out, "PASS  warns.yaml  (load warnings)")) << warns.out;
  EXPECT_TRUE(Has(warns.out, "PASS  warns.yaml  w")) << warns.out;

  Write("quiet.yaml", header + R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo ok, timeout: 30s, retry: { max_attempts: 2 } }]
)");
  Result quiet = Steps("test quiet.yaml");
  EXPECT_EQ(quiet.exit_code, 1) << quiet.out;
  EXPECT_TRUE(Has(quiet.out,
                  "FAIL  quiet.yaml  (load warnings)  (0ms): no warning says: "
                  "declares 'retry' but no 'timeout'") ||
              Has(quiet.out,
                  "no warning says: declares 'retry' but no "
                  "'timeout'"))
      << quiet.out;
}

TEST_F(TestCommandTest, ExpectStrictHeaderIsHonoured) {
  const std::string header =
      "# expect-strict: Valid: strict (1 step) — 1 warning; failing due to "
      "--strict\n";
  Write("strict.yaml", header + R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo ok, retry: { max_attempts: 2 } }]
)");
  Result warned = Steps("test strict.yaml");
  EXPECT_EQ(warned.exit_code, 0) << warned.out;
  EXPECT_TRUE(Has(warned.out, "PASS  strict.yaml  (load warnings)"))
      << warned.out;

  Write("strict.yaml", header + R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo ok, timeout: 30s, retry: { max_attempts: 2 } }]
)");
  Result clean = Steps("test strict.yaml");
  EXPECT_EQ(clean.exit_code, 1) << clean.out;
  EXPECT_TRUE(Has(clean.out,
                  "validate --strict says \"Valid: strict (1 "
                  "step)\" and passes"))
      << clean.out;
}

TEST_F(TestCommandTest, EnsureRefusesAttemptsAsItRefusesRetry) {
  Write("ensure.yaml", R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo fetched }]
  ensure:
    task: cleanup
    run: echo cleaned up
    attempts: 2
)");
  Result r = Steps("validate ensure.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "ensure.yaml:7: error: 'attempts' is refused on "
                  "an 'ensure' hook step — ensure runs exactly "
                  "once"))
      << r.out;
  Write("retry.yaml", R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo fetched }]
  ensure:
    task: cleanup
    run: echo cleaned up
    timeout: 30s
    retry: { max_attempts: 2 }
)");
  Result same = Steps("validate retry.yaml");
  EXPECT_EQ(same.exit_code, 65) << same.out;
  EXPECT_TRUE(Has(same.out, "ensure runs exactly once")) << same.out;
  // On a step's own hook other than ensure, attempts stays allowed.
  Write("hook.yaml", R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo fetched }]
  on_success:
    task: notify
    run: echo done
    attempts: 2
)");
  EXPECT_EQ(Steps("validate hook.yaml").exit_code, 0);
}

TEST_F(TestCommandTest, MaxDelayZeroIsRefusedAtLoad) {
  auto file = [](const std::string& max_delay) {
    return "jobs:\n- name: w\n  plan:\n  - task: fetch\n    run: exit 1\n"
           "    timeout: 30s\n    retry:\n      max_attempts: 3\n"
           "      base_delay_ms: 200\n      max_delay_ms: " +
           max_delay + "\n";
  };
  Write("zero.yaml", file("0"));
  Result zero = Steps("validate zero.yaml");
  EXPECT_EQ(zero.exit_code, 65) << zero.out;
  EXPECT_TRUE(Has(zero.out,
                  "zero.yaml:10: error: 'retry.max_delay_ms' "
                  "must be a positive number (got 0) — a cap of "
                  "0 would make every wait 0; omit "
                  "'max_delay_ms' for no cap"))
      << zero.out;
  Write("negative.yaml", file("-1"));
  EXPECT_EQ(Steps("validate negative.yaml").exit_code, 65);
  Write("one.yaml", file("1"));  // The edge: 1 ms is a cap.
  EXPECT_EQ(Steps("validate one.yaml").exit_code, 0);
}

TEST_F(TestCommandTest, AFixersAttemptsComeFromItsAgentEntry) {
  // The fixer's first request meets a 500; only a second attempt, from the
  // agent entry's attempts: 2, lets it write the file the task needs.
  const std::string pipeline = R"(agents:
- name: fixer
  attempts: 2
  source: { model: mock/fixer }
  tools: [write_file]
jobs:
- name: build
  plan:
  - task: check
    run: test -f patched.txt
    FIX
  assert: { execution: [fixer, check], outcome: succeeded }
mock:
  fixer:
  - status: 500
    body: '{"error": {"message": "overloaded"}}'
  - call: { name: write_file, arguments: { path: patched.txt, content: "x" } }
  - say: Created patched.txt.
)";
  auto with = [&](const std::string& fix) {
    std::string text = pipeline;
    text.replace(text.find("FIX"), 3, fix);
    return text;
  };
  Write("entry.yaml", with("fix: fixer"));
  Result entry = Steps("test entry.yaml");
  EXPECT_EQ(entry.exit_code, 0) << entry.out;
  // fix: {attempts} comes first.
  Write("own.yaml", with("fix: { agent: fixer, attempts: 1 }"));
  Result own = Steps("test own.yaml");
  EXPECT_EQ(own.exit_code, 1) << own.out;
  EXPECT_TRUE(Has(own.out, "execution [fixer, check]") ||
              Has(own.out, "outcome failed"))
      << own.out;
}

TEST_F(TestCommandTest, JobAssertStepsAreCheckedAndBadEntriesRefused) {
  Write("steps.yaml", R"(jobs:
- name: j
  plan:
  - task: fetch
    run: exit 1
    retry: { max_attempts: 3, base_delay_ms: 50 }
  assert:
    outcome: failed
    steps:
    - { name: fetch, attempts: 2, waits_ms: [50, 50], tolerance_ms: 40 }
    - { name: absent, outcome: succeeded }
)");
  Result r = Steps("test steps.yaml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "step 'fetch': 3 attempts, expected 2")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "step 'absent': did not run (assert.steps, line "
                  "11)"))
      << r.out;

  Write("bad.yaml", R"(jobs:
- name: j
  plan: [{ task: fetch, run: "true" }]
  assert:
    steps:
    - { attempts: 2 }
    - { name: fetch, waits_ms: 200, outcome: fine }
)");
  Result bad = Steps("validate bad.yaml");
  EXPECT_EQ(bad.exit_code, 65) << bad.out;
  EXPECT_TRUE(Has(bad.out,
                  "bad.yaml:6: error: an 'assert.steps' entry "
                  "needs the 'name' of the step"))
      << bad.out;
  EXPECT_TRUE(Has(bad.out,
                  "bad.yaml:7: error: 'assert.steps.waits_ms' "
                  "must be a list"))
      << bad.out;
  EXPECT_TRUE(Has(bad.out,
                  "'assert.steps.outcome' must be succeeded, "
                  "failed, errored or aborted, not 'fine'"))
      << bad.out;
}

}  // namespace
