// `steps run` at home in CI, through the real binary: under GitHub Actions
// (GITHUB_ACTIONS=true) a failing step becomes a workflow annotation at its
// pipeline line and a Markdown summary is appended to $GITHUB_STEP_SUMMARY;
// `--summary FILE` writes the same summary anywhere; outside GitHub Actions
// nothing is annotated and $GITHUB_STEP_SUMMARY is left alone.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using test_support::RunInShell;
using test_support::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Job `build` succeeds; job `check` fails at its step `lint` (line 7); job
// `review`'s agent answers with reported usage.
constexpr char kPipeline[] = R"(jobs:
- name: build
  plan:
  - { task: compile, run: "echo compiled" }
- name: check
  plan:
  - task: lint
    run: exit 3
- name: review
  plan:
  - agent: judge
    messages: [judge it]
agents:
- name: judge
  source: { model: mock/judge }
mock:
  judge:
  - say: fine
    usage: { prompt_tokens: 1200, completion_tokens: 34, cost: 0.0125 }
)";

TEST(CiReportTest, UnderGithubActionsAFailingStepIsAnnotatedAtItsLine) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  dir.Write("summary.md", "earlier step's summary\n");
  auto r = RunInShell(dir.path(),
                      "GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=summary.md "
                      "$STEPS run p.yaml --mock --plain --state-dir st");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "::error file=p.yaml,line=7,title=steps%3A check / lint "
                  "failed::exited with code 3\n"))
      << r.out;
  // Only the failing step is annotated.
  EXPECT_EQ(r.out.find("::error"), r.out.rfind("::error")) << r.out;

  const std::string summary = ReadFile(dir / "summary.md");
  // Appended: what earlier workflow steps wrote stays.
  EXPECT_EQ(summary.rfind("earlier step's summary\n", 0), 0u) << summary;
  EXPECT_TRUE(Has(summary, "## `steps run p.yaml`")) << summary;
  EXPECT_TRUE(Has(summary, "2 of 3 jobs succeeded")) << summary;
  EXPECT_TRUE(Has(summary, "| check | **failed** |")) << summary;
  // Steps, attempts, turns, tokens (prompt + completion) and cost.
  EXPECT_TRUE(Has(summary, "| review | succeeded | ")) << summary;
  EXPECT_TRUE(Has(summary, " | 1 | 1 | 1 | 1234 | $0.0125 |")) << summary;
  EXPECT_TRUE(Has(summary, "### Failures")) << summary;
  EXPECT_TRUE(Has(summary, "- **check / lint** (`p.yaml:7`) failed: exited "
                           "with code 3"))
      << summary;
  EXPECT_TRUE(Has(summary, "### Slowest steps")) << summary;
}

TEST(CiReportTest, OutsideGithubActionsNothingIsAnnotated) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  dir.Write("summary.md", "untouched\n");
  auto r = RunInShell(dir.path(),
                      "env -u GITHUB_ACTIONS GITHUB_STEP_SUMMARY=summary.md "
                      "$STEPS run p.yaml --mock --plain --state-dir st");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(Has(r.out, "::error")) << r.out;
  EXPECT_EQ(ReadFile(dir / "summary.md"), "untouched\n");
}

TEST(CiReportTest, SummaryFileGetsTheSameSummaryAnywhere) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  dir.Write("out.md", "stale\n");
  auto r = RunInShell(dir.path(),
                      "GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=gh.md "
                      "$STEPS run p.yaml --mock --plain --state-dir st "
                      "--summary out.md");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string written = ReadFile(dir / "out.md");
  // Replaced, not appended; the same text GitHub got.
  EXPECT_FALSE(Has(written, "stale")) << written;
  EXPECT_EQ(written, ReadFile(dir / "gh.md"));
  EXPECT_TRUE(Has(written, "| build | succeeded | ")) << written;
}

TEST(CiReportTest, ARefusedPipelineIsAnnotatedAtTheLineOfItsError) {
  TempDir dir;
  // The value holds the characters a workflow command must escape.
  dir.Write("bad.yaml",
            "jobs:\n- name: j\n  plan:\n"
            "  - { task: t, run: \"true\", timeout: \"5%, x\" }\n");
  auto r = RunInShell(dir.path(),
                      "GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=gh.md "
                      "$STEPS run bad.yaml --plain --state-dir st");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "::error file=bad.yaml,line=4,title=steps%3A refused at "
                  "load::'timeout': invalid duration '5%25, x'"))
      << r.out;
  EXPECT_TRUE(Has(ReadFile(dir / "gh.md"), "refused at load")) << r.out;
}

TEST(CiReportTest, AnUnwritableSummaryIsSaidAndTheRunStillCounts) {
  TempDir dir;
  dir.Write("ok.yaml", "jobs:\n- name: j\n  plan:\n  - { task: t, run: \"true\" }\n");
  auto r = RunInShell(dir.path(),
                      "$STEPS run ok.yaml --plain --state-dir st "
                      "--summary no/such/dir/s.md");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "--summary: cannot write no/such/dir/s.md")) << r.out;
}

// `steps test` annotates the jobs whose assert: did not hold, at the job's
// line, and never a step that failed as its job's assert: expects.
TEST(CiReportTest, StepsTestAnnotatesOnlyVerdicts) {
  TempDir dir;
  dir.Write("f.yaml", R"(jobs:
- name: meant-to-fail
  plan:
  - { task: t, run: exit 1 }
  assert: { outcome: failed }
- name: wrong
  plan:
  - { task: u, run: "true" }
  assert: { outcome: failed }
)");
  auto r = RunInShell(dir.path(),
                      "GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=gh.md "
                      "$STEPS test f.yaml --summary out.md");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out, "::error file=f.yaml,line=6,title=steps test%3A job "
                         "wrong failed::"))
      << r.out;
  EXPECT_EQ(r.out.find("::error"), r.out.rfind("::error")) << r.out;
  const std::string summary = ReadFile(dir / "out.md");
  EXPECT_EQ(summary, ReadFile(dir / "gh.md"));
  EXPECT_TRUE(Has(summary, "## `steps test f.yaml`")) << summary;
  EXPECT_TRUE(Has(summary, "1 passed, 1 failed.")) << summary;
  EXPECT_TRUE(Has(summary, "| f.yaml | meant-to-fail | passed |")) << summary;
  EXPECT_TRUE(Has(summary, "| f.yaml | wrong | **FAILED** |")) << summary;
  EXPECT_TRUE(Has(summary, "- **wrong** (`f.yaml:6`)")) << summary;
  EXPECT_FALSE(Has(summary, "meant-to-fail / t")) << summary;
}

}  // namespace
}  // namespace steps
