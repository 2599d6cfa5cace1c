// Runs the real `steps` binary: every spec example under fixtures/spec loads,
// or is refused (or warned about) with the spec text's own message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/steps_cli.h"

namespace {

namespace fs = std::filesystem;

using RunResult = steps::test_support::CliResult;
using steps::test_support::ShellQuote;

// Runs `steps ARGS` in the test's working folder; stdout and stderr
// together.
RunResult RunSteps(const std::string& args) {
  return steps::test_support::RunSteps(fs::current_path().string(), args);
}

// The value of a "# KEY: value" header line, or "".
std::string Header(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  const std::string prefix = "# " + key + ": ";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return "";
}

// The pipelines under `dir`: every *.yaml but the mock scripts
// (*.mock.yaml), which `steps test DIR` skips too.
std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".yaml" &&
        e.path().stem().extension() != ".mock") {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

const fs::path kSource = STEPS_SOURCE_DIR;

TEST(SpecFixturesTest, EveryExampleOfBothTextsHasAFixture) {
  // One file per example, named after its section (spec text 002, then 000).
  const std::set<std::string> expected = {"attempts-agent-review",
                                          "attempts-any-step-kind",
                                          "timeout-dont",
                                          "timeout-do",
                                          "job-timeout-bounded",
                                          "job-timeout-bounded-expired",
                                          "expired-timeout-dont",
                                          "expired-timeout-do",
                                          "fix-interaction",
                                          "timeout-classification-deadline",
                                          "timeout-classification-outage",
                                          "agent-implicit-deadline",
                                          "deadline-on-agent-entry",
                                          "zero-means-no-limit",
                                          "retry-block",
                                          "retry-max-attempts",
                                          "retry-exhausted",
                                          "retry-max-attempts-zero",
                                          "retry-backoff-fixed",
                                          "retry-backoff-linear",
                                          "retry-backoff-exponential",
                                          "retry-backoff-exponential-capped",
                                          "retry-backoff-invalid",
                                          "retry-base-delay-invalid",
                                          "retry-on-timeout",
                                          "retry-on-timeout-without-idempotent",
                                          "retry-total-timeout",
                                          "timeout-zero-refused",
                                          "warning-retry-without-timeout",
                                          "warning-total-at-or-below-timeout",
                                          "warning-unknown-retry-key",
                                          "warning-retry-on-agent",
                                          "strict",
                                          "retry-on-ensure-refused"};
  std::set<std::string> found;
  for (const fs::path& f : YamlFiles(kSource / "fixtures/spec"))
    found.insert(f.stem().string());
  for (const std::string& name : expected)
    EXPECT_TRUE(found.count(name)) << name;
}

TEST(SpecFixturesTest, EachLoadsOrIsRefusedWithTheTextsMessage) {
  int checked = 0;
  for (const fs::path& f : YamlFiles(kSource / "fixtures")) {
    SCOPED_TRACE(f.string());
    const std::string refused = Header(f, "expect-refused");
    const std::string warning = Header(f, "expect-warning");
    const std::string strict = Header(f, "expect-strict");
    RunResult r = RunSteps("validate " + ShellQuote(f.string()));
    if (!refused.empty()) {
      EXPECT_EQ(r.exit_code, 65) << r.out;
      EXPECT_NE(r.out.find(": error: " + refused), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("Invalid: "), std::string::npos) << r.out;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.out;
      EXPECT_NE(r.out.find("Valid: " + f.stem().string()), std::string::npos)
          << r.out;
    }
    if (!warning.empty()) {
      EXPECT_NE(r.out.find(": warning: "), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(warning), std::string::npos) << r.out;
      RunResult s = RunSteps("validate --strict " + ShellQuote(f.string()));
      EXPECT_EQ(s.exit_code, 65) << "--strict fails on the warning\n" << s.out;
    }
    if (!strict.empty()) {
      RunResult s = RunSteps("validate --strict " + ShellQuote(f.string()));
      EXPECT_EQ(s.exit_code, 65) << s.out;
      EXPECT_NE(s.out.find(strict), std::string::npos) << s.out;
      EXPECT_EQ(r.exit_code, 0) << "without --strict a warning passes";
    }
    ++checked;
  }
  EXPECT_GE(checked, 34);
}

TEST(SpecFixturesTest, WarningLinesCarryFileAndLine) {
  fs::path f = kSource / "fixtures/spec/warning-unknown-retry-key.yaml";
  RunResult r = RunSteps("validate " + ShellQuote(f.string()));
  EXPECT_NE(
      r.out.find(f.string() + ":10: warning: unknown key 'jitter' (line 10)"),
      std::string::npos)
      << r.out;
}

TEST(CliTest, ExamplesValidateAndExplain) {
  for (const fs::path& f : YamlFiles(kSource / "examples")) {
    RunResult v = RunSteps("validate " + ShellQuote(f.string()));
    EXPECT_EQ(v.exit_code, 0) << v.out;
    RunResult e = RunSteps("explain " + ShellQuote(f.string()));
    EXPECT_EQ(e.exit_code, 0) << e.out;
    EXPECT_NE(e.out.find("bound"), std::string::npos) << e.out;
  }
}

TEST(CliTest, ExitCodes) {
  EXPECT_EQ(RunSteps("").exit_code, 0) << "no subcommand: help";
  EXPECT_EQ(RunSteps("frobnicate").exit_code, 64);
  EXPECT_EQ(RunSteps("validate").exit_code, 64) << "no file";
  EXPECT_EQ(RunSteps("validate --bogus x.yaml").exit_code, 64);
  EXPECT_EQ(RunSteps("validate /nonexistent.yaml").exit_code, 65);
  RunResult help = RunSteps("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("validate"), std::string::npos);
  EXPECT_NE(help.out.find("explain"), std::string::npos);
  RunResult sub_help = RunSteps("explain --help");
  EXPECT_EQ(sub_help.exit_code, 0);
  EXPECT_NE(sub_help.out.find("--job"), std::string::npos);
  fs::path example = kSource / "examples/hello.yaml";
  RunResult no_job =
      RunSteps("explain " + ShellQuote(example.string()) + " --job nope");
  EXPECT_EQ(no_job.exit_code, 64);
  EXPECT_NE(no_job.out.find("no job named 'nope'"), std::string::npos);
  RunResult one_job = RunSteps("explain " + ShellQuote(example.string()) +
                               " --job release-notes");
  EXPECT_EQ(one_job.exit_code, 0) << one_job.out;
}

}  // namespace
