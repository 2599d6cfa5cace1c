// `steps test` and `steps validate` as a user runs them, on the contract's
// finer points: which job a missed mock expectation fails, what JUnit puts in
// each testcase, the expect-warning / expect-strict headers, and what the
// loader refuses on ensure hooks and retry blocks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";

class TestCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-testcmd-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }

  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    return {std::istreambuf_iterator<char>(in),
            std::istreambuf_iterator<char>()};
  }

  struct Result {
    int exit_code = -1;
    std::string output;
  };

  // Runs steps with `args` in the temporary folder; stdout+stderr captured.
  Result Steps(const std::string& args) {
    std::string cmd = "cd '" + dir_ + "' && '" + kSteps + "' " + args + " 2>&1";
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

  std::string dir_;
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "PASS  expect.yaml  first")) << r.output;
  EXPECT_TRUE(Has(r.output, "FAIL  expect.yaml  second")) << r.output;
  EXPECT_TRUE(Has(r.output, "step 'b': mock expectation missed: line 12: "
                            "expect last_contains"))
      << r.output;
  EXPECT_FALSE(Has(r.output, "(mock expectations)")) << r.output;
  EXPECT_TRUE(Has(r.output, "\n1 passed, 1 failed\n")) << r.output;
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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string xml = Read("report.xml");
  EXPECT_TRUE(Has(xml, "<testsuites name=\"steps test\" tests=\"3\" "
                       "failures=\"1\" errors=\"1\" skipped=\"0\""))
      << xml;
  EXPECT_TRUE(Has(xml, "<testsuite name=\"steps\" tests=\"3\" failures=\"1\" "
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
  EXPECT_EQ(warns.exit_code, 0) << warns.output;
  EXPECT_TRUE(Has(warns.output, "PASS  warns.yaml  (load warnings)"))
      << warns.output;
  EXPECT_TRUE(Has(warns.output, "PASS  warns.yaml  w")) << warns.output;

  Write("quiet.yaml", header + R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo ok, timeout: 30s, retry: { max_attempts: 2 } }]
)");
  Result quiet = Steps("test quiet.yaml");
  EXPECT_EQ(quiet.exit_code, 1) << quiet.output;
  EXPECT_TRUE(Has(quiet.output,
                  "FAIL  quiet.yaml  (load warnings)  (0ms): no warning says: "
                  "declares 'retry' but no 'timeout'") ||
              Has(quiet.output, "no warning says: declares 'retry' but no "
                                "'timeout'"))
      << quiet.output;
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
  EXPECT_EQ(warned.exit_code, 0) << warned.output;
  EXPECT_TRUE(Has(warned.output, "PASS  strict.yaml  (load warnings)"))
      << warned.output;

  Write("strict.yaml", header + R"(jobs:
- name: w
  plan: [{ task: fetch, run: echo ok, timeout: 30s, retry: { max_attempts: 2 } }]
)");
  Result clean = Steps("test strict.yaml");
  EXPECT_EQ(clean.exit_code, 1) << clean.output;
  EXPECT_TRUE(Has(clean.output, "validate --strict says \"Valid: strict (1 "
                                "step)\" and passes"))
      << clean.output;
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
  EXPECT_EQ(r.exit_code, 65) << r.output;
  EXPECT_TRUE(Has(r.output, "ensure.yaml:7: error: 'attempts' is refused on "
                            "an 'ensure' hook step — ensure runs exactly "
                            "once"))
      << r.output;
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
  EXPECT_EQ(same.exit_code, 65) << same.output;
  EXPECT_TRUE(Has(same.output, "ensure runs exactly once")) << same.output;
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
  EXPECT_EQ(zero.exit_code, 65) << zero.output;
  EXPECT_TRUE(Has(zero.output, "zero.yaml:10: error: 'retry.max_delay_ms' "
                               "must be a positive number (got 0) — a cap of "
                               "0 would make every wait 0; omit "
                               "'max_delay_ms' for no cap"))
      << zero.output;
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
  EXPECT_EQ(entry.exit_code, 0) << entry.output;
  // fix: {attempts} comes first.
  Write("own.yaml", with("fix: { agent: fixer, attempts: 1 }"));
  Result own = Steps("test own.yaml");
  EXPECT_EQ(own.exit_code, 1) << own.output;
  EXPECT_TRUE(Has(own.output, "execution [fixer, check]") ||
              Has(own.output, "outcome failed"))
      << own.output;
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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "step 'fetch': 3 attempts, expected 2")) << r.output;
  EXPECT_TRUE(Has(r.output, "step 'absent': did not run (assert.steps, line "
                            "11)"))
      << r.output;

  Write("bad.yaml", R"(jobs:
- name: j
  plan: [{ task: fetch, run: "true" }]
  assert:
    steps:
    - { attempts: 2 }
    - { name: fetch, waits_ms: 200, outcome: fine }
)");
  Result bad = Steps("validate bad.yaml");
  EXPECT_EQ(bad.exit_code, 65) << bad.output;
  EXPECT_TRUE(Has(bad.output, "bad.yaml:6: error: an 'assert.steps' entry "
                              "needs the 'name' of the step"))
      << bad.output;
  EXPECT_TRUE(Has(bad.output, "bad.yaml:7: error: 'assert.steps.waits_ms' "
                              "must be a list"))
      << bad.output;
  EXPECT_TRUE(Has(bad.output, "'assert.steps.outcome' must be succeeded, "
                              "failed, errored or aborted, not 'fine'"))
      << bad.output;
}

}  // namespace
