// The job's workspace through `steps run`: what tasks leave in it (FIFOs,
// large files) never blocks, slows or outlasts later steps, and workspace
// work counts against the step's timeout and stops on abort.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace test_support = steps::test_support;
using Result = test_support::CliResult;

class WorkspaceCliTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    temp_.Write(name, text);
  }

  // Runs steps in the temporary folder, stdout+stderr captured. A run that
  // hangs (the defect these tests guard against) is killed after 120 s so
  // the suite reports it instead of hanging.
  Result Steps(const std::string& args) {
    test_support::StepsOptions options;
    options.kill_after = std::chrono::seconds(120);
    return test_support::RunSteps(dir_, args, options);
  }

  test_support::TempDir temp_;
  const std::string& dir_ = temp_.path();
};

// The duration printed on the line "task: NAME OUTCOME in D", in ms; -1
// when there is no such line.
long ReportedMillis(const std::string& output, const std::string& head) {
  size_t at = output.find(head + " in ");
  if (at == std::string::npos) return -1;
  size_t from = at + head.size() + 4;
  size_t used = 0;
  double value = std::stod(output.substr(from), &used);
  const std::string unit = output.substr(from + used, 2);
  if (unit == "ms") return static_cast<long>(value);
  if (unit[0] == 's') return static_cast<long>(value * 1000);
  if (unit[0] == 'm') return static_cast<long>(value * 60000);
  return -1;
}

TEST(ReportedMillisTest, ReadsThePrintedUnits) {
  EXPECT_EQ(ReportedMillis("task: b succeeded in 30ms\n", "task: b succeeded"),
            30);
  EXPECT_EQ(ReportedMillis("task: b failed in 1.131s: x", "task: b failed"),
            1131);
  EXPECT_EQ(ReportedMillis("nothing", "task: b failed"), -1);
}

// A FIFO left in the artifacts and in an output folder is skipped with a
// warning; the later step hashes and copies the rest and runs.
TEST_F(WorkspaceCliTest, FifoInTheWorkspaceIsSkippedWithAWarning) {
  Write("p.yaml",
        "jobs:\n- name: j\n  plan:\n"
        "  - task: a\n    outputs: [o]\n"
        "    run: mkfifo \"$STEPS_ARTIFACTS/p\" o/q && echo data > o/f\n"
        "  - task: b\n    timeout: 30s\n    inputs: [o]\n"
        "    run: cat o/f; test -e o/q || echo no-fifo\n");
  Result r = Steps("run p.yaml --plain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("b | data"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("b | no-fifo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("WRN workspace.skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("artifacts/p type=fifo"), std::string::npos) << r.out;
}

// SIGTERM ends a run whose workspace holds a FIFO at once, with 143.
TEST_F(WorkspaceCliTest, FifoAndSigtermEndPromptly) {
  Write("p.yaml",
        "jobs:\n- name: j\n  plan:\n"
        "  - task: a\n    run: mkfifo \"$STEPS_ARTIFACTS/p\"\n"
        "  - task: b\n    run: |\n      echo $$ > '" +
            dir_ + "/started'\n      sleep 1000\n");
  const pid_t pid = test_support::SpawnSteps(dir_, {"run", "p.yaml", "--plain"},
                                             dir_ + "/out.log");
  ASSERT_GT(pid, 0);
  // Polls (bounded) for the later step to start: it never did while
  // hashing blocked in open() on the FIFO.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool started = false;
  while (!started && std::chrono::steady_clock::now() < until) {
    started = fs::exists(dir_ + "/started") && fs::file_size(dir_ + "/started");
    if (!started) std::this_thread::sleep_for(milliseconds(10));
  }
  const auto sent = std::chrono::steady_clock::now();
  kill(pid, SIGTERM);
  // Bounded: a run stuck in open() ignores SIGTERM and is killed here.
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - sent > std::chrono::seconds(30)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  const auto took = std::chrono::steady_clock::now() - sent;
  const std::string output = temp_.Read("out.log");
  EXPECT_TRUE(started) << "the step after the FIFO never started\n" << output;
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 143) << output;
  EXPECT_LT(took, std::chrono::seconds(5)) << output;
}

// A 2 GB file nobody declared costs later steps nothing (sparse: no disk),
// and one a step declares as input is hashed under its timeout: the step
// ends at its timeout and reports the time it spent, not 17 s.
TEST_F(WorkspaceCliTest, LargeFilesCostOnlyTheStepsThatDeclareThem) {
  Write("p.yaml",
        "jobs:\n- name: j\n  plan:\n"
        "  - task: a\n    outputs: [big]\n"
        "    run: truncate -s 2G \"$STEPS_ARTIFACTS/huge\" big/file\n"
        "  - task: b\n    timeout: 1s\n    run: echo later\n"
        "  - task: c\n    timeout: 1s\n    inputs: [big]\n"
        "    run: echo never\n");
  const auto began = std::chrono::steady_clock::now();
  Result r = Steps("run p.yaml --plain");
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_EQ(r.exit_code, 1) << r.out;
  // Generous: the step itself is an echo; hashing 2 GB takes seconds.
  const long b = ReportedMillis(r.out, "task: b succeeded");
  EXPECT_GE(b, 0) << r.out;
  EXPECT_LT(b, 900) << r.out;
  EXPECT_NE(r.out.find("STEP_TIMEOUT: Step 'c' timed out after 1000ms "
                       "while hashing the workspace"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("c | never"), std::string::npos) << r.out;
  const long c = ReportedMillis(r.out, "task: c failed");
  EXPECT_GE(c, 1000) << "the reported duration includes the hashing\n" << r.out;
  EXPECT_LT(c, 5000) << r.out;
  EXPECT_LT(took, std::chrono::seconds(15)) << r.out;
}

// A task plants a hard link to a file outside the workspace; the agent's
// file tools refuse it, say why, and the outside file keeps its bytes.
TEST_F(WorkspaceCliTest, FileToolsRefuseAHardLinkPlantedByATask) {
  Write("outside.txt", "secret\n");
  Write("p.yaml",
        "agents:\n- name: coder\n  source: { model: mock/coder }\n"
        "  tools: [read_file, write_file]\n"
        "jobs:\n- name: j\n  plan:\n"
        "  - task: plant\n    run: ln '" +
            dir_ +
            "/outside.txt' \"$STEPS_ARTIFACTS/notes.txt\"\n"
            "  - agent: coder\n    messages: [edit the notes]\n"
            "    attempts: 1\n"
            "  assert: { outcome: succeeded }\n"
            "mock:\n  coder:\n"
            "  - call: {name: read_file, arguments: {path: notes.txt}}\n"
            "  - expect: {tool_result: true, last_contains: 'has 2 hard "
            "links'}\n"
            "    call: {name: write_file, arguments: {path: notes.txt, "
            "content: pwned}}\n"
            "  - expect: {tool_result: true, last_contains: 'write_file: "
            "refused'}\n"
            "    say: done\n");
  Result r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed"), std::string::npos) << r.out;
  std::ifstream in(dir_ + "/outside.txt");
  std::string kept((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(kept, "secret\n");
  EXPECT_EQ(r.out.find("secret"), std::string::npos) << r.out;
}

}  // namespace
