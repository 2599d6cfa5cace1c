// How `steps` behaves as a command-line tool, through the real binary: help
// with no arguments, unknown commands named with the closest match,
// versions, the state folder from the environment, stdin pipelines, shell
// completion, `steps init`, and styling off where a terminal can't take it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;


class MannersTest : public ::testing::Test {
 protected:
  using Result = steps::test_support::CliResult;

  // Runs `command` with bash in the temporary folder; $STEPS names the
  // binary.
  Result Sh(const std::string& command) {
    return steps::test_support::RunInShell(dir_, command);
  }

  steps::test_support::TempDir temp_;
  const std::string& dir_ = temp_.path();
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char* kTiny =
    "jobs:\n- name: j\n  plan:\n  - { task: t, run: echo from-stdin }\n";

TEST_F(MannersTest, NoArgumentsPrintsHelpAndSucceeds) {
  Result r = Sh("\"$STEPS\"");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "Usage:")) << r.out;
  for (const char* c : {"run", "test", "validate", "explain", "show", "runs",
                        "ui", "mcp", "init", "completion"})
    EXPECT_TRUE(Has(r.out, std::string("  ") + c + " ")) << c << "\n" << r.out;
}

TEST_F(MannersTest, UnknownCommandIsNamedWithTheClosestMatch) {
  Result r = Sh("\"$STEPS\" bogus");
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_TRUE(Has(r.out, "unknown command \"bogus\"")) << r.out;
  EXPECT_FALSE(Has(r.out, "did you mean")) << r.out;
  Result slip = Sh("\"$STEPS\" valdiate x.yaml");
  EXPECT_EQ(slip.exit_code, 64);
  EXPECT_TRUE(Has(slip.out, "unknown command \"valdiate\"; did you mean "
                            "\"validate\"?"))
      << slip.out;
  Result prefix = Sh("\"$STEPS\" expl");
  EXPECT_TRUE(Has(prefix.out, "did you mean \"explain\"?")) << prefix.out;
}

TEST_F(MannersTest, PipelineFromStandardInput) {
  std::ofstream(dir_ + "/p.yaml") << kTiny;
  Result v = Sh("\"$STEPS\" validate - < p.yaml");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_TRUE(Has(v.out, "Valid:")) << v.out;
  Result r = Sh("cat p.yaml | \"$STEPS\" run - --plain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "t | from-stdin")) << r.out;
  Result bad = Sh("printf \"jobs: [\" | \"$STEPS\" validate -");
  EXPECT_EQ(bad.exit_code, 65) << bad.out;
  EXPECT_TRUE(Has(bad.out, "<stdin>:")) << bad.out;
}

TEST_F(MannersTest, StateFolderFromTheEnvironment) {
  std::ofstream(dir_ + "/p.yaml") << kTiny;
  Result r = Sh("STEPS_STATE_DIR=elsewhere \"$STEPS\" run p.yaml --plain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir_ + "/elsewhere/steps.db"));
  EXPECT_FALSE(fs::exists(dir_ + "/.steps"));
  Result runs = Sh("STEPS_STATE_DIR=elsewhere \"$STEPS\" runs");
  EXPECT_EQ(runs.exit_code, 0) << runs.out;
  EXPECT_TRUE(Has(runs.out, "succeeded")) << runs.out;
  // The flag wins over the environment.
  Result flag =
      Sh("STEPS_STATE_DIR=nowhere \"$STEPS\" show --state-dir elsewhere");
  EXPECT_EQ(flag.exit_code, 0) << flag.out;
}

TEST_F(MannersTest, ShowAndRunsAgreeWithNoStore) {
  Result show = Sh("\"$STEPS\" show");
  Result runs = Sh("\"$STEPS\" runs");
  EXPECT_EQ(show.exit_code, 1) << show.out;
  EXPECT_EQ(runs.exit_code, show.exit_code) << runs.out;
  EXPECT_TRUE(Has(show.out, "no run store at .steps/steps.db")) << show.out;
  EXPECT_TRUE(Has(runs.out, "no run store at .steps/steps.db")) << runs.out;
}

TEST_F(MannersTest, TestWithNothingToFindSaysWhereItLooked) {
  Result r = Sh("\"$STEPS\" test");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  EXPECT_TRUE(Has(r.out, "no fixtures/ folder in " +
                             fs::canonical(dir_).string()))
      << r.out;
}

TEST_F(MannersTest, InitWritesAPipelineThatPassesAtOnce) {
  Result init = Sh("\"$STEPS\" init demo");
  EXPECT_EQ(init.exit_code, 0) << init.out;
  EXPECT_TRUE(Has(init.out, "steps test demo/steps.yaml")) << init.out;
  Result test = Sh("\"$STEPS\" test demo/steps.yaml");
  EXPECT_EQ(test.exit_code, 0) << test.out;
  EXPECT_TRUE(Has(test.out, "1 passed, 0 failed")) << test.out;
  Result strict = Sh("\"$STEPS\" validate --strict demo/steps.yaml");
  EXPECT_EQ(strict.exit_code, 0) << strict.out;
  // Never overwrites without --force.
  Result again = Sh("\"$STEPS\" init demo");
  EXPECT_EQ(again.exit_code, 1) << again.out;
  EXPECT_TRUE(Has(again.out, "already exists; pass --force")) << again.out;
  EXPECT_EQ(Sh("\"$STEPS\" init demo --force").exit_code, 0);
}

TEST_F(MannersTest, BashCompletionFromTheCommandTable) {
  auto complete = [&](const std::string& words, int cword) {
    return Sh("source <(\"$STEPS\" completion bash); COMP_WORDS=(" + words +
              "); COMP_CWORD=" + std::to_string(cword) +
              "; _steps; echo \"${COMPREPLY[*]}\"");
  };
  Result commands = complete("steps ru", 1);
  EXPECT_EQ(commands.exit_code, 0) << commands.out;
  EXPECT_EQ(commands.out, "run runs\n");
  Result options = complete("steps run --mo", 2);
  EXPECT_EQ(options.out, "--mock\n");
  Result state = complete("steps show --st", 2);
  EXPECT_EQ(state.out, "--state-dir\n");
}

TEST_F(MannersTest, StylingOffForDumbTerminalsAndNoColor) {
  std::ofstream(dir_ + "/p.yaml")
      << "jobs:\n- name: j\n  plan:\n  - { task: t, run: sleep 0.6 }\n";
  // script(1) gives steps a real terminal.
  auto on_tty = [&](const std::string& env) {
    return Sh("TERM=xterm " + env +
              " script -qec \"\\\"$STEPS\\\" run p.yaml\" /dev/null");
  };
  Result styled = on_tty("");
  EXPECT_EQ(styled.exit_code, 0) << styled.out;
  EXPECT_TRUE(Has(styled.out, "\033[2m")) << styled.out;
  Result no_color = on_tty("NO_COLOR=1");
  EXPECT_FALSE(Has(no_color.out, "\033[2m")) << no_color.out;
  EXPECT_TRUE(Has(no_color.out, "\033[J")) << "still live\n" << no_color.out;
  Result dumb = on_tty("TERM=dumb");
  EXPECT_FALSE(Has(dumb.out, "\033[")) << dumb.out;
  EXPECT_TRUE(Has(dumb.out, "task: t succeeded")) << dumb.out;
}

}  // namespace
