// What is refused before anything runs, through the real binary: unknown
// tools, providers, template values and pipes, forward `to:` routes,
// unquoted values in shell scripts, agent sources without their key; and
// the bounds `steps explain` prints for routing, kill grace, huge retry
// schedules and fan-outs under a job deadline.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using steps::test_support::TempDir;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

class PreflightCliTest : public ::testing::Test {
 protected:
  // Runs `steps ARGS` in the temporary folder with the provider key
  // variables unset, stdout and stderr together.
  RunResult Steps(const std::string& args, const std::string& env = "") {
    std::string cmd = "cd '" + dir_.path() +
                      "' && env -u OPENAI_API_KEY -u OPENROUTER_API_KEY "
                      "-u ANTHROPIC_API_KEY -u PREFLIGHT_KEY " +
                      env + " timeout -s KILL 120 '" + kSteps + "' " + args +
                      " 2>&1";
    RunResult r;
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
      r.output.append(buf.data(), n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  bool Exists(const std::string& name) { return fs::exists(dir_ / name); }
  // `touch` of a file in the temporary folder (steps run in folders of
  // their own), for Exists to find.
  std::string Touch(const std::string& name) {
    return "touch '" + (dir_ / name) + "'";
  }

  TempDir dir_;
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

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
    RunResult r = Steps(std::string(cmd) + " p.yaml");
    EXPECT_EQ(r.exit_code, 65) << cmd << "\n" << r.output;
    EXPECT_TRUE(
        Has(r.output, "p.yaml:4: error: agent 'a' grants unknown tool 'grep'"))
        << r.output;
    EXPECT_TRUE(Has(r.output, "run_shell")) << "names the known tools";
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
  RunResult r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:3: error: model 'acme/x' names unknown provider "
                  "'acme'"))
      << r.output;
  EXPECT_TRUE(Has(r.output, "openrouter")) << r.output;
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
  RunResult v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 65) << v.output;
  EXPECT_TRUE(Has(v.output,
                  "p.yaml:9: error: task 't' run: {{ .w | shellquote }}: .w "
                  "is not set here (known: .v)"))
      << v.output;
  RunResult r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.output;
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
  RunResult r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:5: error: resource type 'up' in: {{ .version.ref | "
                  "upper }}: unknown template pipe 'upper'"))
      << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:15: error: task 't' run: {{ .v | upper "
                  "}}: unknown template pipe 'upper'"))
      << r.output;
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
  RunResult r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:4: error: resource type 'up' check: {{ "
                  ".version.ref | shellquote }}: .version is not "
                  "set here"))
      << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:5: error: resource type 'up' out: {{ "
                  ".source.uri | shellquote }}: .source.uri is not "
                  "set (resource 'r'"))
      << r.output;
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
  RunResult v = Steps("validate --strict fwd.yaml");
  EXPECT_EQ(v.exit_code, 65) << v.output;
  EXPECT_TRUE(Has(v.output, "fwd.yaml:6: error: 'to: b' routes forward"))
      << v.output;
  EXPECT_EQ(Steps("run fwd.yaml").exit_code, 65);

  dir_.Write("hook.yaml",
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - task: a\n"
             "    run: 'true'\n"
             "    on_failure: { task: h, run: 'true', to: a }\n");
  RunResult h = Steps("validate hook.yaml");
  EXPECT_EQ(h.exit_code, 65) << h.output;
  EXPECT_TRUE(Has(h.output, "would never route")) << h.output;

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
  RunResult b = Steps("run back.yaml");
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_TRUE(Has(b.output, "max_visits")) << b.output;
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
  RunResult r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.output;
  EXPECT_FALSE(Exists("pwned")) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:4: error: resource type 'up' out: {{ "
                  ".params | json }} would put a value into a "
                  "shell script unquoted"))
      << r.output;
  EXPECT_TRUE(Has(r.output, "{{ .params | json | shellquote }}")) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:15: error: task 't' run: {{ .v }} would "
                  "put a value into a shell script unquoted"))
      << r.output;
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
  RunResult r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(Exists("pwned")) << r.output;
  EXPECT_TRUE(Has(r.output, "{\"x\":\"$(touch '" + (dir_ / "pwned") + "')\"}"))
      << r.output;
  EXPECT_TRUE(Has(r.output, "{{ .State }}")) << r.output;
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
  RunResult r = Steps("run p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.output;
  EXPECT_FALSE(Exists("first-ran")) << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:3: error: model 'openai/gpt-4.1-mini': "
                  "environment variable OPENAI_API_KEY is not set"))
      << r.output;
  EXPECT_TRUE(Has(r.output,
                  "p.yaml:5: error: model 'openai/gpt-4.1-mini': "
                  "environment variable PREFLIGHT_KEY is not set"))
      << r.output;

  // With the keys set the check passes (the agent step itself then fails
  // to reach a server, which is not this test's business).
  dir_.Write("task-only.yaml", Keyed(Touch("first-ran")) +
                                   "- name: k\n"
                                   "  plan:\n"
                                   "  - task: t\n"
                                   "    run: " +
                                   Touch("k-ran") + "\n");
  RunResult k =
      Steps("run task-only.yaml --job k", "OPENAI_API_KEY=x PREFLIGHT_KEY=y");
  EXPECT_EQ(k.exit_code, 0) << k.output;
  // A job that uses no agent needs no key.
  RunResult no_key = Steps("run task-only.yaml --job k");
  EXPECT_EQ(no_key.exit_code, 0) << no_key.output;
  EXPECT_TRUE(Exists("k-ran"));
}

TEST_F(PreflightCliTest, ValidateWarnsAboutAMissingKeyAndStrictFails) {
  dir_.Write("p.yaml", Keyed(Touch("first-ran")));
  RunResult v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_TRUE(Has(v.output,
                  "p.yaml:3: warning: model 'openai/gpt-4.1-mini': "
                  "environment variable OPENAI_API_KEY is not set"))
      << v.output;
  EXPECT_TRUE(Has(v.output, "Valid: p (3 steps) — 2 warnings")) << v.output;
  RunResult s = Steps("validate --strict p.yaml");
  EXPECT_EQ(s.exit_code, 65) << s.output;
  EXPECT_TRUE(Has(s.output, "failing due to --strict")) << s.output;
  RunResult set =
      Steps("validate --strict p.yaml", "OPENAI_API_KEY=x PREFLIGHT_KEY=y");
  EXPECT_EQ(set.exit_code, 0) << set.output;
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
  RunResult m = Steps("run --mock p.yaml");
  EXPECT_EQ(m.exit_code, 0) << m.output;
  RunResult t = Steps("test p.yaml");
  EXPECT_EQ(t.exit_code, 0) << t.output;
  RunResult real = Steps("run p.yaml");
  EXPECT_EQ(real.exit_code, 65) << real.output;
  EXPECT_TRUE(Has(real.output, "OPENAI_API_KEY")) << real.output;
}

TEST_F(PreflightCliTest, TestWithoutMockFailsTheFileNamingTheVariable) {
  dir_.Write("p.yaml", Keyed(Touch("first-ran")));
  RunResult t = Steps("test p.yaml");
  EXPECT_EQ(t.exit_code, 1) << t.output;
  EXPECT_TRUE(Has(t.output, "OPENAI_API_KEY is not set")) << t.output;
  EXPECT_FALSE(Exists("first-ran")) << t.output;
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
  RunResult g = Steps("explain grace.yaml");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  EXPECT_TRUE(Has(JobBoundRow(g.output), "2.3s")) << g.output;

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
  RunResult r = Steps("explain route.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // a and b run up to 3 times each, c once: 7 × (1s + 2s grace).
  EXPECT_TRUE(Has(JobBoundRow(r.output), "21s")) << r.output;
  EXPECT_TRUE(Has(r.output, "max_visits 3")) << r.output;

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
  RunResult o = Steps("explain once.yaml");
  EXPECT_TRUE(Has(JobBoundRow(o.output), " 3s ")) << o.output;
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
  RunResult r = Steps("explain p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(JobBoundRow(r.output), "over 100 years")) << r.output;
  EXPECT_FALSE(Has(r.output, "12495338809h")) << r.output;
  EXPECT_FALSE(Has(r.output, "bound              -"))
      << "no wrapped, negative bound\n"
      << r.output;
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
  RunResult r = Steps("explain p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // 5 cells × (58s + 2s) = 5m in sequence, but no cell starts after the
  // 1m deadline: 1m + one cell of 1m.
  EXPECT_TRUE(Has(JobBoundRow(r.output), "2m ")) << r.output;
  EXPECT_TRUE(Has(r.output, "without the deadline 5m")) << r.output;

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
  RunResult l = Steps("explain long.yaml");
  EXPECT_TRUE(Has(JobBoundRow(l.output), "2m ")) << l.output;
  EXPECT_FALSE(Has(l.output, "without the deadline")) << l.output;
}

}  // namespace
