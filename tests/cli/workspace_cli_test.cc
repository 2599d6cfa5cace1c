// The job's workspace through `steps run`: what tasks leave in it (FIFOs,
// large files) never blocks, slows or outlasts later steps, and workspace
// work counts against the step's timeout and stops on abort.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace test_support = steps::test_support;
using test_support::kStepsBinary;

class WorkspaceCliTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    temp_.Write(name, text);
  }

  struct Result {
    int exit_code = -1;
    std::string output;
  };

  // Runs steps in the temporary folder, stdout+stderr captured. A run that
  // hangs (the defect these tests guard against) is killed after 120 s so
  // the suite reports it instead of hanging.
  Result Steps(const std::string& args) {
    test_support::CliResult r = test_support::RunInShell(
        dir_, "timeout -s KILL 120 \"$STEPS\" " + args);
    return {r.exit_code, r.out};
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
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("b | data"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("b | no-fifo"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("WRN workspace.skipped"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("artifacts/p type=fifo"), std::string::npos)
      << r.output;
}

// SIGTERM ends a run whose workspace holds a FIFO at once, with 143.
TEST_F(WorkspaceCliTest, FifoAndSigtermEndPromptly) {
  Write("p.yaml",
        "jobs:\n- name: j\n  plan:\n"
        "  - task: a\n    run: mkfifo \"$STEPS_ARTIFACTS/p\"\n"
        "  - task: b\n    run: |\n      echo $$ > '" +
            dir_ + "/started'\n      sleep 1000\n");
  std::vector<std::string> args = {kStepsBinary, "run", "p.yaml", "--plain"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = dir_ + "/out.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addchdir_np(&fa, dir_.c_str());
  pid_t pid = 0;
  ASSERT_EQ(
      posix_spawn(&pid, kStepsBinary.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
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
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), {});
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
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // Generous: the step itself is an echo; hashing 2 GB takes seconds.
  const long b = ReportedMillis(r.output, "task: b succeeded");
  EXPECT_GE(b, 0) << r.output;
  EXPECT_LT(b, 900) << r.output;
  EXPECT_NE(r.output.find("STEP_TIMEOUT: Step 'c' timed out after 1000ms "
                          "while hashing the workspace"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("c | never"), std::string::npos) << r.output;
  const long c = ReportedMillis(r.output, "task: c failed");
  EXPECT_GE(c, 1000) << "the reported duration includes the hashing\n"
                     << r.output;
  EXPECT_LT(c, 5000) << r.output;
  EXPECT_LT(took, std::chrono::seconds(15)) << r.output;
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
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 passed, 0 failed"), std::string::npos) << r.output;
  std::ifstream in(dir_ + "/outside.txt");
  std::string kept((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(kept, "secret\n");
  EXPECT_EQ(r.output.find("secret"), std::string::npos) << r.output;
}

}  // namespace
