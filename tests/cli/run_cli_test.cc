// `steps run` and `steps test` as a user runs them: real processes, real
// files, exit codes and signals.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;

namespace test_support = steps::test_support;
using Result = test_support::CliResult;
using test_support::kStepsBinary;

class CliTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    temp_.Write(name, text);
  }

  // Runs steps with `args` in the temporary folder; stdout+stderr captured.
  Result Steps(const std::string& args) {
    return test_support::RunSteps(dir_, args);
  }

  test_support::TempDir temp_;
  const std::string& dir_ = temp_.path();
};

TEST_F(CliTest, RunExitCodes) {
  Write("ok.yaml",
        "jobs:\n- name: j\n  plan:\n  - { task: t, run: echo fine }\n");
  Write("fail.yaml",
        "jobs:\n- name: j\n  plan:\n  - { task: t, run: exit 3 }\n");
  Write("error.yaml",
        "agents: [{ name: a, source: { model: mock/a } }]\n"
        "jobs:\n- name: j\n  plan:\n  - { agent: a, messages: [hi], attempts: "
        "1 }\n"
        "mock:\n  default: { status: 503 }\n");
  Write("bad.yaml", "jobs:\n- name: j\n  plan:\n  - { task: t }\n");
  Result ok = Steps("run ok.yaml --plain");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("t | fine"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("task: t succeeded"), std::string::npos) << ok.out;
  EXPECT_EQ(Steps("run fail.yaml --plain").exit_code, 1);
  Result errored = Steps("run error.yaml --plain --mock");
  EXPECT_EQ(errored.exit_code, 2) << "a job failed because a step errored\n"
                                  << errored.out;
  Result refused = Steps("run bad.yaml");
  EXPECT_EQ(refused.exit_code, 65);
  EXPECT_NE(refused.out.find("bad.yaml:4: error: task 't' has no 'run'"),
            std::string::npos)
      << refused.out;
  EXPECT_EQ(Steps("run ok.yaml --job nope").exit_code, 64);
  EXPECT_EQ(Steps("run").exit_code, 64);
  Result no_mock = Steps("run ok.yaml --mock");
  EXPECT_EQ(no_mock.exit_code, 64);
  EXPECT_NE(no_mock.out.find("--mock needs a 'mock:' block"),
            std::string::npos);
}

TEST_F(CliTest, JobHeaderShowsTheTimeoutAsWritten) {
  Write("p.yaml",
        "jobs:\n- name: j\n  timeout: 15m\n  plan:\n  - { task: t, run: true "
        "}\n");
  Result r = Steps("run p.yaml --plain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("job j (timeout 15m)\n"), std::string::npos) << r.out;
}

TEST_F(CliTest, VersionComesFromTheProject) {
  for (const char* flag : {"--version", "-V"}) {
    Result r = Steps(flag);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, std::string("steps ") + STEPS_VERSION + "\n");
  }
}

TEST_F(CliTest, RunPrintsAttemptMarkers) {
  Write("flaky.yaml",
        "jobs:\n- name: j\n  plan:\n  - task: build\n    attempts: 3\n    run: "
        "exit 1\n");
  Result r = Steps("run flaky.yaml --plain");
  EXPECT_EQ(r.exit_code, 1);
  // The spec's markers: the first attempt plain, later ones numbered.
  EXPECT_NE(r.out.find("task: build\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("task: build (attempt 2/3)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("task: build (attempt 3/3)\n"), std::string::npos)
      << r.out;
}

// On a terminal, a status block shows each running step's elapsed time and
// the time left before its deadline, redrawn in place. `script` gives the
// run a pseudo-terminal.
TEST_F(CliTest, LiveProgressOnATerminal) {
  ASSERT_TRUE(fs::exists("/usr/bin/script"))
      << "util-linux script gives the test a terminal";
  Write("slow.yaml",
        "jobs:\n- name: j\n  plan:\n  - { task: slow, run: sleep 1, timeout: "
        "30s }\n");
  Result r = Steps(
      "run slow.yaml --state-dir st > /dev/null 2>&1; script -qfec \"'" +
      kStepsBinary + "' run slow.yaml --no-cache --state-dir st\" /dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("task: slow  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(30s left)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\033[J"), std::string::npos)
      << "the block is redrawn in place";
  Result plain = Steps("run slow.yaml --no-cache --state-dir st");
  EXPECT_EQ(plain.out.find("left)"), std::string::npos)
      << "no status block off a terminal";
  EXPECT_EQ(plain.out.find("\033["), std::string::npos);
}

TEST_F(CliTest, JobSelection) {
  Write("two.yaml",
        "jobs:\n- name: a\n  plan: [{ task: ta, run: echo A }]\n"
        "- name: b\n  plan: [{ task: tb, run: echo B }]\n");
  Result r = Steps("run two.yaml --plain --job b");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.find("job a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job b"), std::string::npos) << r.out;
}

// SIGINT and SIGTERM abort at once, kill the running task's process group,
// run on_abort and ensure hooks, and exit 130 / 143.
TEST_F(CliTest, SignalsAbortTheRun) {
  Write(
      "hang.yaml",
      "jobs:\n- name: j\n  ensure: { task: tidy, run: echo tidied > '" + dir_ +
          "/tidied' }\n  plan:\n  - task: hang\n    run: |\n      echo $$ > '" +
          dir_ + "/pgid'\n      sleep 1000 &\n      sleep 1000\n");
  for (int sig : {SIGINT, SIGTERM}) {
    fs::remove(dir_ + "/pgid");
    fs::remove(dir_ + "/tidied");
    const pid_t pid = test_support::SpawnSteps(
        dir_, {"run", "hang.yaml", "--plain"}, dir_ + "/out.log");
    ASSERT_GT(pid, 0);
    // Wait (bounded) until the task has written its process group.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!fs::exists(dir_ + "/pgid") || fs::file_size(dir_ + "/pgid") == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), until)
          << "the task never started";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto sent = std::chrono::steady_clock::now();
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    auto took = std::chrono::steady_clock::now() - sent;
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), sig == SIGINT ? 130 : 143);
    EXPECT_LT(took, std::chrono::seconds(5))
        << "abort stops everything at once";
    EXPECT_TRUE(fs::exists(dir_ + "/tidied")) << "ensure ran after the abort";
    int pgid = 0;
    std::ifstream(dir_ + "/pgid") >> pgid;
    ASSERT_GT(pgid, 0);
    // Killed members may linger as zombies until reaped by init; a live
    // member would still answer signal 0 and show in /proc with state != Z.
    bool live = false;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::ifstream stat(e.path() / "stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      size_t close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size()) continue;
      char state = line[close + 2];
      std::istringstream rest(line.substr(close + 4));
      int ppid = 0, pgrp = 0;
      rest >> ppid >> pgrp;
      if (pgrp == pgid && state != 'Z') live = true;
    }
    EXPECT_FALSE(live) << "a process of the aborted task is still running";
  }
}

TEST_F(CliTest, TestCommandJudgesJobsAndWritesJunit) {
  fs::create_directories(dir_ + "/suite");
  Write("suite/pass.yaml",
        "jobs:\n- name: good\n  plan: [{ task: t, run: echo hi }]\n"
        "  assert: { execution: [t], outcome: succeeded }\n");
  Write("suite/expected-failure.yaml",
        "jobs:\n- name: red\n  plan: [{ task: t, run: exit 1 }]\n"
        "  assert: { execution: [t], outcome: failed }\n");
  Write("suite/wrong.yaml",
        "jobs:\n- name: mismatch\n  plan: [{ task: t, run: echo hi }]\n"
        "  assert: { execution: [t, u], outcome: succeeded }\n");
  Write("suite/refused.yaml",
        "# expect-refused: 'attempts' must be a positive integer\n"
        "jobs:\n- name: r\n  plan: [{ task: t, run: x, attempts: 0 }]\n");
  Result all = Steps("test suite --junit report.xml");
  EXPECT_EQ(all.exit_code, 1) << all.out;
  EXPECT_NE(all.out.find("\n3 passed, 1 failed\n"), std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("FAIL  suite/wrong.yaml  mismatch"), std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("execution [t], expected [t, u]"), std::string::npos)
      << all.out;
  const std::string xml = temp_.Read("report.xml");
  EXPECT_NE(
      xml.find("<testsuites name=\"steps test\" tests=\"4\" failures=\"1\""),
      std::string::npos)
      << xml;
  EXPECT_NE(xml.find("name=\"mismatch\""), std::string::npos);
  EXPECT_NE(xml.find("<failure message="), std::string::npos);
  fs::remove(dir_ + "/suite/wrong.yaml");
  Result green = Steps("test suite");
  EXPECT_EQ(green.exit_code, 0) << green.out;
  EXPECT_NE(green.out.find("\n3 passed, 0 failed\n"), std::string::npos)
      << green.out;
  EXPECT_EQ(Steps("test no-such-dir").exit_code, 64);
}

TEST_F(CliTest, TestCommandFailsAMissedMockExpectation) {
  Write("expect.yaml", R"(agents: [{ name: a, source: { model: mock/a } }]
jobs:
- name: j
  plan: [{ agent: a, messages: ["Hello there"] }]
mock:
  a:
  - expect: { last_contains: "something else" }
    say: hi
)");
  Result r = Steps("test expect.yaml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL  expect.yaml  j"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mock expectation missed"), std::string::npos) << r.out;
}

}  // namespace
