// What is refused before anything runs, through the real binary: unknown
// tools, providers, template values and pipes, forward `to:` routes,
// unquoted values in shell scripts, agent sources without their key; and
// the bounds `steps explain` prints for routing, kill grace, huge retry
// schedules and fan-outs under a job deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
namespace test_support = steps::test_support;
using test_support::TempDir;

using Result = test_support::CliResult;
using test_support::Has;

class PreflightCliTest : public ::testing::Test {
 protected:
  // Runs `steps ARGS` in the temporary folder with the provider key
  // variables unset, stdout and stderr together.
  Result Steps(const std::string& args, const std::string& env = "") {
    test_support::StepsOptions options;
    options.prefix =
        "env -u OPENAI_API_KEY -u OPENROUTER_API_KEY -u ANTHROPIC_API_KEY "
        "-u PREFLIGHT_KEY " +
        env;
    options.kill_after = std::chrono::seconds(120);
    return test_support::RunSteps(dir_.path(), args, options);
  }

  bool Exists(const std::string& name) { return fs::exists(dir_ / name); }
  // `touch` of a file in the temporary folder (steps run in folders of
  // their own), for Exists to find.
  std::string Touch(const std::string& name) {
    return "touch '" + (dir_ / name) + "'";
  }

  TempDir dir_;
};

// --- A: names that refer to nothing -------------------------------------

TEST_F(PreflightCliTest, UnknownToolIsRefusedWithItsLine) {
  dir_.Write("p.yaml",
             "agents:\n"
             "- name: a\n"
             "  source: { model: openai/gpt-4.1-mini }\n"
             "  tools: [read_file, grep]\n"
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - agent: a\n"
             "    messages: [hi]\n");
  for (const char* cmd : {"validate --strict", "run", "explain"}) {
    Result r = Steps(std::string(cmd) + " p.yaml");
    EXPECT_EQ(r.exit_code, 65) << cmd << "\n" << r.out;
    EXPECT_TRUE(
        Has(r.out, "p.yaml:4: error: agent 'a' grants unknown tool 'grep'"))
        << r.out;
    EXPECT_TRUE(Has(r.out, "run_shell")) << "names the known tools";
  }
}

TEST_F(PreflightCliTest, UnknownProviderIsRefused) {
  dir_.Write("p.yaml",
             "agents:\n"
             "- name: a\n"
             "  source: { model: acme/x }\n"
             "  fallback: [{ model: openai/gpt-4.1-mini }]\n"
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - agent: a\n"
             "    messages: [hi]\n");
  Result r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:3: error: model 'acme/x' names unknown provider "
                  "'acme'"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "openrouter")) << r.out;
}

TEST_F(PreflightCliTest, TemplateValueThatIsNotSetIsRefusedBeforeAnyStep) {
  dir_.Write("p.yaml",
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
                 "      run: echo {{ .w | shellquote }}\n");
  Result v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 65) << v.out;
  EXPECT_TRUE(Has(v.out,
                  "p.yaml:9: error: task 't' run: {{ .w | shellquote }}: .w "
                  "is not set here (known: .v)"))
      << v.out;
  Result r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_FALSE(Exists("first-ran")) << "refused before the first step";
}

TEST_F(PreflightCliTest, UnknownPipeIsRefusedInScriptsAndMessages) {
  dir_.Write("p.yaml",
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
             "      run: echo {{ .v | upper }}\n");
  Result r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:5: error: resource type 'up' in: {{ .version.ref | "
                  "upper }}: unknown template pipe 'upper'"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:15: error: task 't' run: {{ .v | upper "
                  "}}: unknown template pipe 'upper'"))
      << r.out;
}

TEST_F(PreflightCliTest, ResourceScriptValuesAreCheckedPerStep) {
  dir_.Write("p.yaml",
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
             "  - put: r\n");
  Result r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:4: error: resource type 'up' check: {{ "
                  ".version.ref | shellquote }}: .version is not "
                  "set here"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:5: error: resource type 'up' out: {{ "
                  ".source.uri | shellquote }}: .source.uri is not "
                  "set (resource 'r'"))
      << r.out;
}

TEST_F(PreflightCliTest, ForwardRouteIsRefusedAndBackwardRunsAsBefore) {
  dir_.Write("fwd.yaml",
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - task: a\n"
             "    run: exit 1\n"
             "    to: b\n"
             "  - task: b\n"
             "    run: echo b\n");
  Result v = Steps("validate --strict fwd.yaml");
  EXPECT_EQ(v.exit_code, 65) << v.out;
  EXPECT_TRUE(Has(v.out, "fwd.yaml:6: error: 'to: b' routes forward")) << v.out;
  EXPECT_EQ(Steps("run fwd.yaml").exit_code, 65);

  dir_.Write("hook.yaml",
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - task: a\n"
             "    run: 'true'\n"
             "    on_failure: { task: h, run: 'true', to: a }\n");
  Result h = Steps("validate hook.yaml");
  EXPECT_EQ(h.exit_code, 65) << h.out;
  EXPECT_TRUE(Has(h.out, "would never route")) << h.out;

  // To itself or an earlier step stays valid: the step re-runs up to
  // max_visits times.
  dir_.Write("back.yaml",
             "jobs:\n"
             "- name: j\n"
             "  max_visits: 2\n"
             "  plan:\n"
             "  - task: a\n"
             "    run: echo a >> visits\n"
             "  - task: b\n"
             "    run: exit 1\n"
             "    to: a\n");
  Result b = Steps("run back.yaml");
  EXPECT_EQ(b.exit_code, 1) << b.out;
  EXPECT_TRUE(Has(b.out, "max_visits")) << b.out;
}

// --- C: what a shell runs is quoted -------------------------------------

TEST_F(PreflightCliTest, UnquotedValueInAShellScriptIsRefused) {
  dir_.Write("p.yaml",
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
                 "      run: echo {{ .v }}\n");
  Result r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_FALSE(Exists("pwned")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:4: error: resource type 'up' out: {{ "
                  ".params | json }} would put a value into a "
                  "shell script unquoted"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "{{ .params | json | shellquote }}")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:15: error: task 't' run: {{ .v }} would "
                  "put a value into a shell script unquoted"))
      << r.out;
}

TEST_F(PreflightCliTest, QuotedJsonRunsAsTextAndLiteralBracesPassThrough) {
  dir_.Write("p.yaml",
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
                 "    run: echo '{{ \"{{\" }} .State }}'\n");
  Result r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(Exists("pwned")) << r.out;
  EXPECT_TRUE(Has(r.out, "{\"x\":\"$(touch '" + (dir_ / "pwned") + "')\"}"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "{{ .State }}")) << r.out;
}

// --- B: sources that cannot be served ------------------------------------

std::string Keyed(const std::string& touch) {
  return "agents:\n"
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
         touch +
         "\n"
         "  - agent: a\n"
         "    messages: [hi]\n"
         "  - agent: b\n"
         "    messages: [hi]\n";
}

TEST_F(PreflightCliTest, MissingKeyRefusesTheRunBeforeTheFirstStep) {
  dir_.Write("p.yaml", Keyed(Touch("first-ran")));
  Result r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_FALSE(Exists("first-ran")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:3: error: model 'openai/gpt-4.1-mini': "
                  "environment variable OPENAI_API_KEY is not set"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "p.yaml:5: error: model 'openai/gpt-4.1-mini': "
                  "environment variable PREFLIGHT_KEY is not set"))
      << r.out;

  // With the keys set the check passes (the agent step itself then fails
  // to reach a server, which is not this test's business).
  dir_.Write("task-only.yaml", Keyed(Touch("first-ran")) +
                                   "- name: k\n"
                                   "  plan:\n"
                                   "  - task: t\n"
                                   "    run: " +
                                   Touch("k-ran") + "\n");
  Result k =
      Steps("run task-only.yaml --job k", "OPENAI_API_KEY=x PREFLIGHT_KEY=y");
  EXPECT_EQ(k.exit_code, 0) << k.out;
  // A job that uses no agent needs no key.
  Result no_key = Steps("run task-only.yaml --job k");
  EXPECT_EQ(no_key.exit_code, 0) << no_key.out;
  EXPECT_TRUE(Exists("k-ran"));
}

TEST_F(PreflightCliTest, ValidateWarnsAboutAMissingKeyAndStrictFails) {
  dir_.Write("p.yaml", Keyed(Touch("first-ran")));
  Result v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_TRUE(Has(v.out,
                  "p.yaml:3: warning: model 'openai/gpt-4.1-mini': "
                  "environment variable OPENAI_API_KEY is not set"))
      << v.out;
  EXPECT_TRUE(Has(v.out, "Valid: p (3 steps) — 2 warnings")) << v.out;
  Result s = Steps("validate --strict p.yaml");
  EXPECT_EQ(s.exit_code, 65) << s.out;
  EXPECT_TRUE(Has(s.out, "failing due to --strict")) << s.out;
  Result set =
      Steps("validate --strict p.yaml", "OPENAI_API_KEY=x PREFLIGHT_KEY=y");
  EXPECT_EQ(set.exit_code, 0) << set.out;
}

TEST_F(PreflightCliTest, MockedRunsNeedNoKey) {
  dir_.Write("p.yaml",
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
             "  - say: hello\n");
  Result m = Steps("run --mock p.yaml");
  EXPECT_EQ(m.exit_code, 0) << m.out;
  Result t = Steps("test p.yaml");
  EXPECT_EQ(t.exit_code, 0) << t.out;
  Result real = Steps("run p.yaml");
  EXPECT_EQ(real.exit_code, 65) << real.out;
  EXPECT_TRUE(Has(real.out, "OPENAI_API_KEY")) << real.out;
}

TEST_F(PreflightCliTest, TestWithoutMockFailsTheFileNamingTheVariable) {
  dir_.Write("p.yaml", Keyed(Touch("first-ran")));
  Result t = Steps("test p.yaml");
  EXPECT_EQ(t.exit_code, 1) << t.out;
  EXPECT_TRUE(Has(t.out, "OPENAI_API_KEY is not set")) << t.out;
  EXPECT_FALSE(Exists("first-ran")) << t.out;
}

// --- D: explain's bounds ---------------------------------------------------

// The value printed on the job's "bound" row.
std::string JobBoundRow(const std::string& explain) {
  size_t at = explain.find("\n    bound");
  if (at == std::string::npos) return "";
  size_t end = explain.find('\n', at + 1);
  return explain.substr(at + 1, end - at - 1);
}

TEST_F(PreflightCliTest, ExplainCountsKillGraceAndRouting) {
  dir_.Write("grace.yaml",
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - task: t\n"
             "    timeout: 300ms\n"
             "    run: sleep 10\n");
  Result g = Steps("explain grace.yaml");
  EXPECT_EQ(g.exit_code, 0) << g.out;
  EXPECT_TRUE(Has(JobBoundRow(g.out), "2.3s")) << g.out;

  dir_.Write("route.yaml",
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
             "    run: 'true'\n");
  Result r = Steps("explain route.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // a and b run up to 3 times each, c once: 7 × (1s + 2s grace).
  EXPECT_TRUE(Has(JobBoundRow(r.out), "21s")) << r.out;
  EXPECT_TRUE(Has(r.out, "max_visits 3")) << r.out;

  // max_visits: 1 is the edge: routing can never re-run anything.
  dir_.Write("once.yaml",
             "jobs:\n"
             "- name: j\n"
             "  max_visits: 1\n"
             "  plan:\n"
             "  - task: a\n"
             "    timeout: 1s\n"
             "    run: 'true'\n"
             "    to: a\n");
  Result o = Steps("explain once.yaml");
  EXPECT_TRUE(Has(JobBoundRow(o.out), " 3s ")) << o.out;
}

TEST_F(PreflightCliTest, ExplainSaturatesHugeRetrySchedules) {
  dir_.Write("p.yaml",
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
             "      base_delay_ms: 1000000\n");
  Result r = Steps("explain p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(JobBoundRow(r.out), "over 100 years")) << r.out;
  EXPECT_FALSE(Has(r.out, "12495338809h")) << r.out;
  EXPECT_FALSE(Has(r.out, "bound              -"))
      << "no wrapped, negative bound\n"
      << r.out;
}

TEST_F(PreflightCliTest, ExplainBoundsAFanOutByTheJobDeadline) {
  dir_.Write("p.yaml",
             "jobs:\n"
             "- name: j\n"
             "  timeout: 1m\n"
             "  plan:\n"
             "  - across: [{var: v, values: [a, b, c, d, e], max_in_flight: "
             "1}]\n"
             "    do:\n"
             "    - task: t\n"
             "      timeout: 58s\n"
             "      run: 'true'\n");
  Result r = Steps("explain p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // 5 cells × (58s + 2s) = 5m in sequence, but no cell starts after the
  // 1m deadline: 1m + one cell of 1m.
  EXPECT_TRUE(Has(JobBoundRow(r.out), "2m ")) << r.out;
  EXPECT_TRUE(Has(r.out, "without the deadline 5m")) << r.out;

  // At the edge: a deadline past the sum changes nothing.
  dir_.Write("long.yaml",
             "jobs:\n"
             "- name: j\n"
             "  timeout: 5m\n"
             "  plan:\n"
             "  - across: [{var: v, values: [a, b], max_in_flight: 1}]\n"
             "    do:\n"
             "    - task: t\n"
             "      timeout: 58s\n"
             "      run: 'true'\n");
  Result l = Steps("explain long.yaml");
  EXPECT_TRUE(Has(JobBoundRow(l.out), "2m ")) << l.out;
  EXPECT_FALSE(Has(l.out, "without the deadline")) << l.out;
}

}  // namespace
