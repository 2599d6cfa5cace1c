// Step assertions through `steps test`: each kind failing with its message
// (the passing cases are fixtures under fixtures/asserts/), every miss of a
// step reported, a judge answered by the mock (pass, fail, garbage, an
// erroring judge), --repeat with a deliberately flaky job, --min-pass-rate,
// the assertion table, JUnit and --json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "mock_provider/script.h"
#include "mock_provider/server.h"

namespace {

namespace test_support = steps::test_support;
using Result = test_support::CliResult;
using steps::MockEngine;
using steps::MockHttpServer;
using steps::ParseMockScriptText;
using test_support::Has;

class AssertCliTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    dir_.Write(name, text);
  }
  std::string Read(const std::string& name) { return dir_.Read(name); }
  Result Steps(const std::string& args) {
    return test_support::RunSteps(dir_.path(), args);
  }
  // `steps test` on a one-job file whose plan is `plan`; expects the job to
  // fail and returns the output.
  std::string FailingJob(const std::string& plan,
                         const std::string& rest = "") {
    Write("p.yaml", "jobs:\n- name: j\n  plan:\n" + plan + rest);
    Result r = Steps("test p.yaml");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(Has(r.out, "FAIL  p.yaml  j")) << r.out;
    return r.out;
  }

  test_support::TempDir dir_;
};

TEST_F(AssertCliTest, EachTextCheckFailsWithItsMessage) {
  struct Case {
    const char* run;
    const char* check;
    const char* message;
  } cases[] = {
      {"echo hello", "equals: bye",
       "assert: the output is \"hello\", not \"bye\""},
      {"echo a", "contains_all: [a, b, c]",
       "assert: the output lacks \"b\", \"c\""},
      {"echo a", "contains_any: [x, y]",
       "assert: the output contains none of \"x\", \"y\""},
      {"echo an error", "not_contains: error",
       "assert: the output contains \"error\""},
      {"echo v1", "regex: '^v\\d\\d'",
       "assert: no line of the output matches /^v\\d\\d/"},
      {"echo '{'", "json: true", "assert: the output is not JSON: \"{\""},
      {"echo '{\"n\": 0}'",
       "json: { schema: { type: object, properties: { n: { minimum: 1 } } } }",
       "assert: the output does not match the schema: field \"n\": "},
      {"sleep 0.3", "max_duration: 100ms", "assert: took "},
      {"exit 2", "code: 3", "exited with code 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.check);
    std::string out =
        FailingJob(std::string("  - task: t\n    run: |\n      ") + c.run +
                   "\n    assert: { " + c.check + " }\n");
    EXPECT_TRUE(Has(out, c.message)) << out;
  }
}

TEST_F(AssertCliTest, EveryMissOfAStepIsReportedAndTabled) {
  std::string out = FailingJob(R"(  - task: t
    run: echo a bad day
    assert:
      equals: a good day
      contains_all: [day]
      not_contains: [bad]
)");
  EXPECT_TRUE(Has(out,
                  "assert: the output is \"a bad day\", not \"a good "
                  "day\"; the output contains \"bad\""))
      << out;
  // The table: every check of the step, with its tally.
  EXPECT_TRUE(Has(out, "assertions:\n  p.yaml  j\n")) << out;
  EXPECT_TRUE(Has(out, "    t: equals        0/1  last miss: the output is"))
      << out;
  EXPECT_TRUE(Has(out, "    t: contains_all  1/1\n")) << out;
  EXPECT_TRUE(Has(out, "    t: not_contains  0/1  last miss:")) << out;
}

TEST_F(AssertCliTest, AgentChecksFailWithTheirMessages) {
  Write("p.yaml", R"(agents:
- name: reader
  source: { model: openai/m, price: { input: 1000000, output: 1000000 } }
  tools: [list_files]
jobs:
- name: j
  plan:
  - agent: reader
    messages: [go]
    assert:
      tool_called:
      - { name: list_files, arguments: { path: src }, count: 1 }
      - read_file
      max_turns_used: 1
      max_tokens: 10
      max_cost: 0.5
mock:
  reader:
  - call: { name: list_files, arguments: { path: "." } }
    usage: { prompt_tokens: 10, completion_tokens: 1 }
  - say: done
    usage: { prompt_tokens: 10, completion_tokens: 1 }
)");
  Result r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  for (const char* message :
       {"tool 'list_files' was called 0 times with arguments holding "
        "{\"path\":\"src\"}, expected exactly 1",
        "tool 'read_file' was called 0 times, expected at least 1",
        "used 2 turns, at most 1 allowed",
        "spent 22 tokens, at most 10 allowed",
        "cost $22.0000, at most $0.5000 allowed"}) {
    EXPECT_TRUE(Has(r.out, message)) << message << "\n" << r.out;
  }
}

// A judge answered by the mock: a pass, a FAIL with its reason, an answer
// that is no verdict, and a judge whose requests fail.
TEST_F(AssertCliTest, JudgeVerdictsFromTheMock) {
  Write("p.yaml", R"(agents:
- { name: grader, source: { model: openai/g }, attempts: 1 }
jobs:
- name: passes
  plan:
  - task: t
    run: echo Release 2.1
    assert: { judge: { agent: grader, rubric: Names a version. } }
- name: fails
  plan:
  - task: t
    run: echo Release
    assert: { judge: { agent: grader, rubric: Names a version. } }
- name: garbage
  plan:
  - task: t
    run: echo Release
    assert: { judge: { agent: grader, rubric: Names a version. } }
- name: broken
  plan:
  - task: t
    run: echo Release
    assert: { judge: { agent: grader, rubric: Names a version. } }
mock:
  grader:
  - say: "PASS - it names 2.1"
  - say: "FAIL: no version is named"
  - say: "I think this is quite nice overall."
  - status: 404
)");
  Result r = Steps("test p.yaml --junit report.xml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "PASS  p.yaml  passes")) << r.out;
  EXPECT_TRUE(Has(r.out, "assert: the judge says FAIL: no version is named"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "assert: the judge answered no verdict (expected a first "
                  "line PASS or FAIL): \"I think this is quite nice "
                  "overall.\""))
      << r.out;
  EXPECT_TRUE(Has(r.out, "assert: the judge 'grader' gave no verdict (errored"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 3 failed")) << r.out;
  const std::string xml = Read("report.xml");
  EXPECT_TRUE(Has(xml,
                  "check 't: judge' passed 0/1: the judge says FAIL: no "
                  "version is named"))
      << xml;
}

// A judge's run is labelled as one wherever the run is shown: live, in
// `steps show` and in its JSON.
TEST_F(AssertCliTest, AJudgesRunIsLabelledAsOne) {
  Write("p.yaml", R"(agents:
- { name: grader, source: { model: openai/g } }
jobs:
- name: j
  plan:
  - task: t
    run: echo Release 2.1
    assert: { judge: { agent: grader, rubric: Names a version. } }
mock:
  grader: [{say: "PASS"}]
)");
  Result run = Steps("run p.yaml --mock --plain --state-dir s");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(Has(run.out, "judge agent: grader succeeded")) << run.out;
  Result show = Steps("show --state-dir s");
  EXPECT_TRUE(Has(show.out, "grader  (judge)")) << show.out;
  EXPECT_FALSE(Has(show.out, "grader  (agent)")) << show.out;
  Result json = Steps("show --json --state-dir s");
  auto steps = nlohmann::json::parse(json.out)["jobs"][0]["steps"];
  ASSERT_EQ(steps.size(), 2u) << json.out;
  for (const auto& step : steps) {
    EXPECT_EQ(step["judge"], step["name"] == "grader") << step.dump();
  }
}

// A job that fails on runs 1, 4, 7 and 10 of 10: a task keeps a counter in
// a file outside the run's folders.
std::string FlakyPipeline(const std::string& dir) {
  return R"(jobs:
- name: flaky
  plan:
  - task: count
    run: |
      n=$(( $(cat )" +
         dir + R"(/counter 2>/dev/null || echo 0) + 1 ))
      echo $n > )" +
         dir + R"(/counter
      if [ $(( (n - 1) % 3 )) -eq 0 ]; then echo miss; else echo hit; fi
    assert: { stdout: hit }
- name: steady
  plan:
  - task: t
    run: echo ok
    assert: { equals: ok }
)";
}

TEST_F(AssertCliTest, RepeatReportsPassRates) {
  Write("flaky.yaml", FlakyPipeline(dir_.path()));
  Result r = Steps("test flaky.yaml --repeat 10 --junit report.xml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "FAIL  flaky.yaml  flaky")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "[6/10 runs passed]: passed 6/10 runs, below the "
                  "minimum of every run; last failure:"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "PASS  flaky.yaml  steady")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "    count: stdout  6/10  last miss: stdout does not "
                  "contain \"hit\""))
      << r.out;
  EXPECT_TRUE(Has(r.out, "    t: equals  10/10")) << r.out;
  EXPECT_EQ(Read("counter"), "10\n");
}

TEST_F(AssertCliTest, MinPassRateDecides) {
  Write("flaky.yaml", FlakyPipeline(dir_.path()));
  // 6/10 is at 60%: the edge passes.
  Result r = Steps("test flaky.yaml --repeat 10 --min-pass-rate 60%");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "PASS  flaky.yaml  flaky  (")) << r.out;
  EXPECT_TRUE(Has(r.out, "[6/10 runs passed]")) << r.out;
  EXPECT_TRUE(Has(r.out, "2 passed, 0 failed")) << r.out;
  // Just above: fails (the counter starts again).
  Write("counter", "0\n");
  r = Steps("test flaky.yaml --repeat 10 --min-pass-rate 0.61");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "below the minimum of 0.61")) << r.out;
}

// A flaky model: a loopback mock provider (to `steps test` a real OpenAI
// endpoint) whose answers name the version on runs 1, 3 and 4 of the
// first five, and on 1 and 5 of the next.
// Its state lasts across the repeats, as a real model's whims do.
TEST_F(AssertCliTest, AFlakyModelShowsAsItsPassRate) {
  auto script = ParseMockScriptText(
      "m:\n"
      "  - say: Release 2.1 is out.\n"
      "  - say: A release is out.\n"
      "  - say: Release 2.1 is out.\n"
      "  - say: Release 2.1 is out.\n"
      "  - say: A release is out.\n"
      "  - say: Release 2.1 is out.\n"
      "  - say: A release is out.\n"
      "  - say: A release is out.\n"
      "  - say: A release is out.\n"
      "  - say: Release 2.1 is out.\n");
  ASSERT_TRUE(script.ok()) << script.status().message();
  MockHttpServer server(std::make_shared<MockEngine>(std::move(*script)));
  ASSERT_TRUE(server.Start().ok());
  Write("p.yaml",
        "agents:\n"
        "- name: writer\n"
        "  source: {model: openai/m, base_url: " +
            server.base_url() +
            "}\n"
            "jobs:\n"
            "- name: notes\n"
            "  plan:\n"
            "  - agent: writer\n"
            "    messages: [Write the release note.]\n"
            "    assert: { contains_all: ['2.1'] }\n");
  test_support::StepsOptions key;
  key.prefix = "OPENAI_API_KEY=sk-test";
  Result r = test_support::RunSteps(
      dir_.path(), "test p.yaml --repeat 5 --min-pass-rate 60%", key);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "[3/5 runs passed]")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "writer: contains_all  3/5  last miss: the output "
                  "lacks \"2.1\""))
      << r.out;
  // The next five answers pass 2 of 5: under the minimum.
  r = test_support::RunSteps(dir_.path(),
                             "test p.yaml --repeat 5 --min-pass-rate 60%", key);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "passed 2/5 runs, below the minimum of 60%")) << r.out;
  EXPECT_EQ(server.engine().Requests().size(), 10u);
}

TEST_F(AssertCliTest, RepeatAndRateEdgesAreRefused) {
  Write("p.yaml", "jobs:\n- name: j\n  plan: [{ task: t, run: echo }]\n");
  for (const char* args : {"--repeat 0", "--repeat -3", "--min-pass-rate 1.5",
                           "--min-pass-rate 101%", "--min-pass-rate -0.1",
                           "--min-pass-rate half"}) {
    SCOPED_TRACE(args);
    Result r = Steps(std::string("test p.yaml ") + args);
    EXPECT_EQ(r.exit_code, 64) << r.out;
  }
  Result r = Steps("test p.yaml --repeat 0");
  EXPECT_TRUE(Has(r.out, "steps test: --repeat must be 1 or more (got 0)"))
      << r.out;
  r = Steps("test p.yaml --min-pass-rate 1.5");
  EXPECT_TRUE(Has(r.out,
                  "--min-pass-rate must be a rate from 0 to 1 or a "
                  "percentage from 0% to 100% (got '1.5')"))
      << r.out;
}

TEST_F(AssertCliTest, JsonReportsCasesRatesAndChecks) {
  Write("flaky.yaml", FlakyPipeline(dir_.path()));
  test_support::StepsOptions stdout_only;
  stdout_only.streams = test_support::Streams::kStdoutOnly;
  Result r = test_support::RunSteps(
      dir_.path(), "test flaky.yaml --repeat 4 --min-pass-rate 0.5 --json",
      stdout_only);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["repeat"], 4);
  EXPECT_EQ(j["min_pass_rate"], 0.5);
  EXPECT_EQ(j["passed"], 2);
  ASSERT_EQ(j["cases"].size(), 2u);
  const nlohmann::json& flaky = j["cases"][0];
  EXPECT_EQ(flaky["name"], "flaky");
  EXPECT_EQ(flaky["verdict"], "pass");
  EXPECT_EQ(flaky["runs"], 4);
  EXPECT_EQ(flaky["passes"], 2);  // Runs 1 and 4 fail.
  ASSERT_EQ(flaky["assertions"].size(), 1u);
  EXPECT_EQ(flaky["assertions"][0]["step"], "count");
  EXPECT_EQ(flaky["assertions"][0]["check"], "stdout");
  EXPECT_EQ(flaky["assertions"][0]["judged"], 4);
  EXPECT_EQ(flaky["assertions"][0]["passed"], 2);
}

}  // namespace
