// What is refused before anything runs, through the real binary: unknown
// tools, providers, template values and pipes, forward `to:` routes,
// unquoted values in shell scripts, agent sources (judges' too) without
// their key; and the bounds `steps explain` prints for routing, kill grace,
// huge retry schedules and fan-outs under a job deadline.
//
// Each case writes one pipeline, runs one `steps` command on it and checks
// the exit code, what the output says (or must not say), which files the
// pipeline's steps made, and explain's job bound.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
namespace test_support = steps::test_support;

using Result = test_support::CliResult;
using test_support::Has;

// Stands for the test's temporary folder in a case's pipeline and texts
// (steps run in folders of their own, so what they touch is named in full).
constexpr const char* kDir = "@DIR@";

// `touch` of a file in the temporary folder, for the case to look for.
std::string Touch(const std::string& name) {
  return "touch '" + std::string(kDir) + "/" + name + "'";
}

struct PreflightCase {
  std::string name;     // The test's name.
  std::string yaml;     // The pipeline.
  std::string command;  // `steps` arguments, the pipeline's file among them.
  int exit_code = 0;
  std::vector<std::string> says = {};        // In the output.
  std::vector<std::string> never_says = {};  // Nowhere in the output.
  std::vector<std::string> made = {};        // Files the steps made.
  std::vector<std::string> not_made = {};    // Files no step made.
  std::string bound = "";                    // In explain's job "bound" row.
  std::string env = "";                      // `NAME=value` set for the run.
};

// Names the case in test output (gtest would print its bytes).
void PrintTo(const PreflightCase& c, std::ostream* os) { *os << c.name; }

// --- A: names that refer to nothing -------------------------------------

const std::string kUnknownTool =
    "agents:\n"
    "- name: a\n"
    "  source: { model: openai/gpt-4.1-mini }\n"
    "  tools: [read_file, grep]\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - agent: a\n"
    "    messages: [hi]\n";
// The refusal names the known tools (run_shell among them).
const std::vector<std::string> kUnknownToolSays = {
    "p.yaml:4: error: agent 'a' grants unknown tool 'grep'", "run_shell"};

const std::string kUnknownProvider =
    "agents:\n"
    "- name: a\n"
    "  source: { model: acme/x }\n"
    "  fallback: [{ model: openai/gpt-4.1-mini }]\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - agent: a\n"
    "    messages: [hi]\n";

const std::string kUnsetValue =
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: first\n"
    "    run: " +
    Touch("first-ran") +
    "\n"
    "  - across: [{var: v, values: [x]}]\n"
    "    do:\n"
    "    - task: t\n"
    "      run: echo {{ .w | shellquote }}\n";

const std::string kUnknownPipe =
    "resource_types:\n"
    "- name: up\n"
    "  config:\n"
    "    check: echo '[{\"ref\":\"v1\"}]'\n"
    "    in: echo {{ .version.ref | upper }}\n"
    "resources:\n"
    "- { name: r, type: up, source: {} }\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - get: r\n"
    "  - across: [{var: v, values: [x]}]\n"
    "    do:\n"
    "    - task: t\n"
    "      run: echo {{ .v | upper }}\n";

const std::string kResourceScriptValues =
    "resource_types:\n"
    "- name: up\n"
    "  config:\n"
    "    check: echo '[]' {{ .version.ref | shellquote }}\n"
    "    out: echo {{ .source.uri | shellquote }}\n"
    "resources:\n"
    "- { name: r, type: up, source: { url: x } }\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - get: r\n"
    "  - put: r\n";

const std::string kForwardRoute =
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: a\n"
    "    run: exit 1\n"
    "    to: b\n"
    "  - task: b\n"
    "    run: echo b\n";

const std::string kHookRoute =
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: a\n"
    "    run: 'true'\n"
    "    on_failure: { task: h, run: 'true', to: a }\n";

// To itself or an earlier step stays valid: the step re-runs up to
// max_visits times.
const std::string kBackwardRoute =
    "jobs:\n"
    "- name: j\n"
    "  max_visits: 2\n"
    "  plan:\n"
    "  - task: a\n"
    "    run: echo a >> visits\n"
    "  - task: b\n"
    "    run: exit 1\n"
    "    to: a\n";

// --- C: what a shell runs is quoted -------------------------------------

const std::string kUnquoted =
    "resource_types:\n"
    "- name: up\n"
    "  config:\n"
    "    out: echo {{ .params | json }}\n"
    "resources:\n"
    "- { name: r, type: up, source: {} }\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - put: r\n"
    "    params: { x: \"$(" +
    Touch("pwned") +
    ")\" }\n"
    "  - across: [{var: v, values: [x]}]\n"
    "    do:\n"
    "    - task: t\n"
    "      run: echo {{ .v }}\n";

const std::string kQuotedJson =
    "resource_types:\n"
    "- name: up\n"
    "  config:\n"
    "    out: printf '%s\\n' {{ .params | json | shellquote }}\n"
    "resources:\n"
    "- { name: r, type: up, source: {} }\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - put: r\n"
    "    params: { x: \"$(" +
    Touch("pwned") +
    ")\" }\n"
    "  - task: fmt\n"
    "    run: echo '{{ \"{{\" }} .State }}'\n";

// --- B: sources that cannot be served ------------------------------------

const std::string kKeyed =
    "agents:\n"
    "- name: a\n"
    "  source: { model: openai/gpt-4.1-mini }\n"
    "- name: b\n"
    "  source: { model: openai/gpt-4.1-mini, api_key_env: PREFLIGHT_KEY "
    "}\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: first\n"
    "    run: " +
    Touch("first-ran") +
    "\n"
    "  - agent: a\n"
    "    messages: [hi]\n"
    "  - agent: b\n"
    "    messages: [hi]\n";
// kKeyed and a job k that uses no agent.
const std::string kTaskOnly = kKeyed +
                              "- name: k\n"
                              "  plan:\n"
                              "  - task: t\n"
                              "    run: " +
                              Touch("k-ran") + "\n";
const std::string kBothKeys = "OPENAI_API_KEY=x PREFLIGHT_KEY=y";

// An agent used only as a step's judge is checked like any other.
const std::string kJudged =
    "agents:\n"
    "- name: grader\n"
    "  source: { model: openai/gpt-4.1-mini }\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: first\n"
    "    run: " +
    Touch("first-ran") +
    "\n"
    "    assert:\n"
    "      judge: { agent: grader, rubric: The step says nothing. }\n";

const std::string kMocked =
    "agents:\n"
    "- name: a\n"
    "  source: { model: openai/gpt-4.1-mini }\n"
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - agent: a\n"
    "    messages: [hi]\n"
    "    assert: { stdout: hello }\n"
    "  assert: { execution: [a], outcome: succeeded }\n"
    "mock:\n"
    "  a:\n"
    "  - say: hello\n";

// --- D: explain's bounds ---------------------------------------------------

const std::string kKillGrace =
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: t\n"
    "    timeout: 300ms\n"
    "    run: sleep 10\n";

// a and b run up to 3 times each, c once: 7 × (1s + 2s grace).
const std::string kRouting =
    "jobs:\n"
    "- name: j\n"
    "  max_visits: 3\n"
    "  plan:\n"
    "  - task: a\n"
    "    timeout: 1s\n"
    "    run: 'true'\n"
    "  - task: b\n"
    "    timeout: 1s\n"
    "    run: exit 1\n"
    "    to: a\n"
    "  - task: c\n"
    "    timeout: 1s\n"
    "    run: 'true'\n";

// max_visits: 1 is the edge: routing can never re-run anything.
const std::string kVisitedOnce =
    "jobs:\n"
    "- name: j\n"
    "  max_visits: 1\n"
    "  plan:\n"
    "  - task: a\n"
    "    timeout: 1s\n"
    "    run: 'true'\n"
    "    to: a\n";

const std::string kHugeRetries =
    "jobs:\n"
    "- name: j\n"
    "  plan:\n"
    "  - task: t\n"
    "    timeout: 1s\n"
    "    run: 'true'\n"
    "    retry:\n"
    "      max_attempts: 80\n"
    "      backoff: exponential\n"
    "      base_delay_ms: 1000\n"
    "  - task: u\n"
    "    timeout: 1s\n"
    "    run: 'true'\n"
    "    retry:\n"
    "      max_attempts: 1000000\n"
    "      backoff: exponential\n"
    "      base_delay_ms: 1000000\n";

// 5 cells × (58s + 2s) = 5m in sequence, but no cell starts after the 1m
// deadline: 1m + one cell of 1m.
const std::string kFanOut =
    "jobs:\n"
    "- name: j\n"
    "  timeout: 1m\n"
    "  plan:\n"
    "  - across: [{var: v, values: [a, b, c, d, e], max_in_flight: "
    "1}]\n"
    "    do:\n"
    "    - task: t\n"
    "      timeout: 58s\n"
    "      run: 'true'\n";

// At the edge: a deadline past the sum changes nothing.
const std::string kFanOutLongDeadline =
    "jobs:\n"
    "- name: j\n"
    "  timeout: 5m\n"
    "  plan:\n"
    "  - across: [{var: v, values: [a, b], max_in_flight: 1}]\n"
    "    do:\n"
    "    - task: t\n"
    "      timeout: 58s\n"
    "      run: 'true'\n";

const std::vector<PreflightCase> kCases = {
    // A: names that refer to nothing.
    {.name = "UnknownToolValidateStrict",
     .yaml = kUnknownTool,
     .command = "validate --strict p.yaml",
     .exit_code = 65,
     .says = kUnknownToolSays},
    {.name = "UnknownToolRun",
     .yaml = kUnknownTool,
     .command = "run p.yaml",
     .exit_code = 65,
     .says = kUnknownToolSays},
    {.name = "UnknownToolExplain",
     .yaml = kUnknownTool,
     .command = "explain p.yaml",
     .exit_code = 65,
     .says = kUnknownToolSays},
    {.name = "UnknownProvider",
     .yaml = kUnknownProvider,
     .command = "validate p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:3: error: model 'acme/x' names unknown provider 'acme'",
              "openrouter"}},
    {.name = "UnsetTemplateValueValidate",
     .yaml = kUnsetValue,
     .command = "validate p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:9: error: task 't' run: {{ .w | shellquote }}: .w is "
              "not set here (known: .v)"}},
    // Refused before the first step.
    {.name = "UnsetTemplateValueRun",
     .yaml = kUnsetValue,
     .command = "run p.yaml",
     .exit_code = 65,
     .not_made = {"first-ran"}},
    {.name = "UnknownPipeInScriptsAndMessages",
     .yaml = kUnknownPipe,
     .command = "validate p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:5: error: resource type 'up' in: {{ .version.ref | "
              "upper }}: unknown template pipe 'upper'",
              "p.yaml:15: error: task 't' run: {{ .v | upper }}: unknown "
              "template pipe 'upper'"}},
    {.name = "ResourceScriptValuesAreCheckedPerStep",
     .yaml = kResourceScriptValues,
     .command = "validate p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:4: error: resource type 'up' check: {{ .version.ref | "
              "shellquote }}: .version is not set here",
              "p.yaml:5: error: resource type 'up' out: {{ .source.uri | "
              "shellquote }}: .source.uri is not set (resource 'r'"}},
    {.name = "ForwardRouteValidate",
     .yaml = kForwardRoute,
     .command = "validate --strict fwd.yaml",
     .exit_code = 65,
     .says = {"fwd.yaml:6: error: 'to: b' routes forward"}},
    {.name = "ForwardRouteRun",
     .yaml = kForwardRoute,
     .command = "run fwd.yaml",
     .exit_code = 65},
    {.name = "HookRouteWouldNeverRoute",
     .yaml = kHookRoute,
     .command = "validate hook.yaml",
     .exit_code = 65,
     .says = {"would never route"}},
    {.name = "BackwardRouteRunsAsBefore",
     .yaml = kBackwardRoute,
     .command = "run back.yaml",
     .exit_code = 1,
     .says = {"max_visits"}},
    // C: what a shell runs is quoted.
    {.name = "UnquotedValueInAShellScript",
     .yaml = kUnquoted,
     .command = "run p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:4: error: resource type 'up' out: {{ .params | json }} "
              "would put a value into a shell script unquoted",
              "{{ .params | json | shellquote }}",
              "p.yaml:15: error: task 't' run: {{ .v }} would put a value "
              "into a shell script unquoted"},
     .not_made = {"pwned"}},
    {.name = "QuotedJsonRunsAsTextAndLiteralBracesPassThrough",
     .yaml = kQuotedJson,
     .command = "run p.yaml",
     .exit_code = 0,
     .says = {"{\"x\":\"$(" + Touch("pwned") + ")\"}", "{{ .State }}"},
     .not_made = {"pwned"}},
    // B: sources that cannot be served.
    {.name = "MissingKeyRefusesTheRunBeforeTheFirstStep",
     .yaml = kKeyed,
     .command = "run p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:3: error: model 'openai/gpt-4.1-mini': environment "
              "variable OPENAI_API_KEY is not set",
              "p.yaml:5: error: model 'openai/gpt-4.1-mini': environment "
              "variable PREFLIGHT_KEY is not set"},
     .not_made = {"first-ran"}},
    {.name = "AJudgesMissingKeyRefusesTheRunBeforeTheFirstStep",
     .yaml = kJudged,
     .command = "run p.yaml",
     .exit_code = 65,
     .says = {"p.yaml:3: error: model 'openai/gpt-4.1-mini': environment "
              "variable OPENAI_API_KEY is not set"},
     .not_made = {"first-ran"}},
    // With the keys set the check passes (an agent step would then fail
    // to reach a server, which is not this test's business).
    {.name = "SetKeysPassTheCheck",
     .yaml = kTaskOnly,
     .command = "run task-only.yaml --job k",
     .exit_code = 0,
     .made = {"k-ran"},
     .env = kBothKeys},
    {.name = "AJobWithoutAgentsNeedsNoKey",
     .yaml = kTaskOnly,
     .command = "run task-only.yaml --job k",
     .exit_code = 0,
     .made = {"k-ran"}},
    {.name = "ValidateWarnsAboutAMissingKey",
     .yaml = kKeyed,
     .command = "validate p.yaml",
     .exit_code = 0,
     .says = {"p.yaml:3: warning: model 'openai/gpt-4.1-mini': environment "
              "variable OPENAI_API_KEY is not set",
              "Valid: p (3 steps) — 2 warnings"}},
    {.name = "ValidateStrictFailsOnAMissingKey",
     .yaml = kKeyed,
     .command = "validate --strict p.yaml",
     .exit_code = 65,
     .says = {"failing due to --strict"}},
    {.name = "ValidateStrictPassesWithTheKeys",
     .yaml = kKeyed,
     .command = "validate --strict p.yaml",
     .exit_code = 0,
     .env = kBothKeys},
    {.name = "MockedRunNeedsNoKey",
     .yaml = kMocked,
     .command = "run --mock p.yaml",
     .exit_code = 0},
    {.name = "TestNeedsNoKey",
     .yaml = kMocked,
     .command = "test p.yaml",
     .exit_code = 0},
    {.name = "RealRunOfAMockedPipelineNeedsTheKey",
     .yaml = kMocked,
     .command = "run p.yaml",
     .exit_code = 65,
     .says = {"OPENAI_API_KEY"}},
    {.name = "TestWithoutMockFailsTheFileNamingTheVariable",
     .yaml = kKeyed,
     .command = "test p.yaml",
     .exit_code = 1,
     .says = {"OPENAI_API_KEY is not set"},
     .not_made = {"first-ran"}},
    // D: explain's bounds.
    {.name = "ExplainCountsKillGrace",
     .yaml = kKillGrace,
     .command = "explain grace.yaml",
     .exit_code = 0,
     .bound = "2.3s"},
    {.name = "ExplainCountsRouting",
     .yaml = kRouting,
     .command = "explain route.yaml",
     .exit_code = 0,
     .says = {"max_visits 3"},
     .bound = "21s"},
    {.name = "ExplainMaxVisitsOneNeverReruns",
     .yaml = kVisitedOnce,
     .command = "explain once.yaml",
     .exit_code = 0,
     .bound = " 3s "},
    // No wrapped, negative bound.
    {.name = "ExplainSaturatesHugeRetrySchedules",
     .yaml = kHugeRetries,
     .command = "explain p.yaml",
     .exit_code = 0,
     .never_says = {"12495338809h", "bound              -"},
     .bound = "over 100 years"},
    {.name = "ExplainBoundsAFanOutByTheJobDeadline",
     .yaml = kFanOut,
     .command = "explain p.yaml",
     .exit_code = 0,
     .says = {"without the deadline 5m"},
     .bound = "2m "},
    {.name = "ExplainFanOutUnderALongerDeadline",
     .yaml = kFanOutLongDeadline,
     .command = "explain long.yaml",
     .exit_code = 0,
     .never_says = {"without the deadline"},
     .bound = "2m "},
};

// The pipeline file a case's command names: its word ending in ".yaml".
std::string PipelineFile(const std::string& command) {
  size_t end = command.find(".yaml");
  size_t start = command.rfind(' ', end);
  start = start == std::string::npos ? 0 : start + 1;
  return command.substr(start, end + 5 - start);
}

// `text` with kDir replaced by `dir`.
std::string InDir(std::string text, const std::string& dir) {
  const std::string marker = kDir;
  for (size_t at = text.find(marker); at != std::string::npos;
       at = text.find(marker, at + dir.size()))
    text.replace(at, marker.size(), dir);
  return text;
}

// The value printed on the job's "bound" row.
std::string JobBoundRow(const std::string& explain) {
  size_t at = explain.find("\n    bound");
  if (at == std::string::npos) return "";
  size_t end = explain.find('\n', at + 1);
  return explain.substr(at + 1, end - at - 1);
}

class PreflightCliTest : public ::testing::TestWithParam<PreflightCase> {
 protected:
  // Runs `steps ARGS` in the temporary folder with the provider key
  // variables unset, stdout and stderr together.
  Result Steps(const std::string& args, const std::string& env) {
    test_support::StepsOptions options;
    options.prefix =
        "env -u OPENAI_API_KEY -u OPENROUTER_API_KEY -u ANTHROPIC_API_KEY "
        "-u PREFLIGHT_KEY " +
        env;
    options.kill_after = std::chrono::seconds(120);
    return test_support::RunSteps(dir_.path(), args, options);
  }

  test_support::TempDir dir_;
};

TEST_P(PreflightCliTest, Case) {
  const PreflightCase& c = GetParam();
  dir_.Write(PipelineFile(c.command), InDir(c.yaml, dir_.path()));
  const Result r = Steps(c.command, c.env);
  EXPECT_EQ(r.exit_code, c.exit_code) << c.command << "\n" << r.out;
  for (const std::string& text : c.says)
    EXPECT_TRUE(Has(r.out, InDir(text, dir_.path()))) << text << "\n" << r.out;
  for (const std::string& text : c.never_says)
    EXPECT_FALSE(Has(r.out, text)) << text << "\n" << r.out;
  for (const std::string& name : c.made)
    EXPECT_TRUE(fs::exists(dir_ / name)) << name << "\n" << r.out;
  for (const std::string& name : c.not_made)
    EXPECT_FALSE(fs::exists(dir_ / name)) << name << "\n" << r.out;
  if (!c.bound.empty()) {
    EXPECT_TRUE(Has(JobBoundRow(r.out), c.bound)) << c.bound << "\n" << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Refusals, PreflightCliTest,
                         ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<PreflightCase>& i) {
                           return i.param.name;
                         });

}  // namespace
