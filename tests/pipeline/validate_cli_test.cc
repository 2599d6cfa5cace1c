// Runs the real `steps` binary: every spec example under fixtures/spec loads,
// or is refused (or warned about) with the spec text's own message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

RunResult RunSteps(const std::string& args) {
  std::string cmd = Quote(std::string(STEPS_BINARY_DIR) + "/src/cli/steps") +
                    " " + args + " 2>&1";
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
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

std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path());
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
    RunResult r = RunSteps("validate " + Quote(f.string()));
    if (!refused.empty()) {
      EXPECT_EQ(r.exit_code, 65) << r.output;
      EXPECT_NE(r.output.find(": error: " + refused), std::string::npos)
          << r.output;
      EXPECT_NE(r.output.find("Invalid: "), std::string::npos) << r.output;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("Valid: " + f.stem().string()), std::string::npos)
          << r.output;
    }
    if (!warning.empty()) {
      EXPECT_NE(r.output.find(": warning: "), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(warning), std::string::npos) << r.output;
      RunResult s = RunSteps("validate --strict " + Quote(f.string()));
      EXPECT_EQ(s.exit_code, 65) << "--strict fails on the warning\n"
                                 << s.output;
    }
    if (!strict.empty()) {
      RunResult s = RunSteps("validate --strict " + Quote(f.string()));
      EXPECT_EQ(s.exit_code, 65) << s.output;
      EXPECT_NE(s.output.find(strict), std::string::npos) << s.output;
      EXPECT_EQ(r.exit_code, 0) << "without --strict a warning passes";
    }
    ++checked;
  }
  EXPECT_GE(checked, 34);
}

TEST(SpecFixturesTest, WarningLinesCarryFileAndLine) {
  fs::path f = kSource / "fixtures/spec/warning-unknown-retry-key.yaml";
  RunResult r = RunSteps("validate " + Quote(f.string()));
  EXPECT_NE(r.output.find(f.string() +
                          ":10: warning: unknown key 'jitter' (line 10)"),
            std::string::npos)
      << r.output;
}

TEST(CliTest, ExamplesValidateAndExplain) {
  for (const fs::path& f : YamlFiles(kSource / "examples")) {
    RunResult v = RunSteps("validate " + Quote(f.string()));
    EXPECT_EQ(v.exit_code, 0) << v.output;
    RunResult e = RunSteps("explain " + Quote(f.string()));
    EXPECT_EQ(e.exit_code, 0) << e.output;
    EXPECT_NE(e.output.find("bound"), std::string::npos) << e.output;
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
  EXPECT_NE(help.output.find("validate"), std::string::npos);
  EXPECT_NE(help.output.find("explain"), std::string::npos);
  RunResult sub_help = RunSteps("explain --help");
  EXPECT_EQ(sub_help.exit_code, 0);
  EXPECT_NE(sub_help.output.find("--job"), std::string::npos);
  fs::path example = kSource / "examples/hello.yaml";
  RunResult no_job =
      RunSteps("explain " + Quote(example.string()) + " --job nope");
  EXPECT_EQ(no_job.exit_code, 64);
  EXPECT_NE(no_job.output.find("no job named 'nope'"), std::string::npos);
  RunResult one_job =
      RunSteps("explain " + Quote(example.string()) + " --job release-notes");
  EXPECT_EQ(one_job.exit_code, 0) << one_job.output;
}

}  // namespace
