// LocalProcessLauncher::Start: a child whose pipes are the caller's, ended
// with its whole group by Stop (or the destructor). Real processes; bounds
// generous (5s) for a loaded machine.
#include "process/live_process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "process/local_launcher.h"

namespace steps {
namespace {

using std::chrono::steady_clock;
using test_support::TempDir;

// Dead: no /proc entry, or a zombie nobody has reaped yet.
bool ProcessDead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  size_t paren = text.rfind(')');
  return paren != std::string::npos && text.size() > paren + 2 &&
         text[paren + 2] == 'Z';
}

// SIGKILL reaches a process that holds none of our pipes asynchronously:
// it gets a generous moment to finish dying.
bool ProcessDiesWithin(pid_t pid, std::chrono::seconds limit) {
  auto until = steady_clock::now() + limit;
  while (!ProcessDead(pid)) {
    if (steady_clock::now() > until) return false;
    poll(nullptr, 0, 5);
  }
  return true;
}

// Reads a line from a non-blocking fd, waiting at most 5s.
std::string ReadLine(int fd) {
  std::string line;
  auto until = steady_clock::now() + std::chrono::seconds(5);
  while (steady_clock::now() < until) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    while (read(fd, &c, 1) == 1) {
      if (c == '\n') return line;
      line += c;
    }
  }
  return line;
}

TEST(LiveProcessTest, TalksThroughItsPipesAndStopEndsItsGroup) {
  TempDir dir;
  LocalProcessLauncher launcher;
  ProcessRequest request = ProcessRequest::Shell(
      "sleep 1000 & echo \"$!\"; echo \"$FOO\" >&2; "
      "while read -r l; do echo \"got $l\"; done");
  request.working_dir = dir.path();
  request.env["FOO"] = "bar";
  auto started = launcher.Start(request);
  ASSERT_TRUE(started.ok()) << started.status().message();
  LiveProcess& p = **started;
  pid_t sleeper = std::stoi(ReadLine(p.stdout_fd()));
  EXPECT_EQ(ReadLine(p.stderr_fd()), "bar");
  ASSERT_EQ(write(p.stdin_fd(), "hi\n", 3), 3);
  EXPECT_EQ(ReadLine(p.stdout_fd()), "got hi");
  EXPECT_FALSE(p.Exited());
  EXPECT_EQ(p.DescribeExit(), std::nullopt);
  pid_t leader = p.pid();
  auto start = steady_clock::now();
  p.Stop(Millis(2000));
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(ProcessDead(leader));
  // Its group went too.
  EXPECT_TRUE(ProcessDiesWithin(sleeper, std::chrono::seconds(5)));
  EXPECT_EQ(p.stdout_fd(), -1);
}

TEST(LiveProcessTest, SaysHowItEndedAndTheDestructorReapsIt) {
  LocalProcessLauncher launcher;
  auto started = launcher.Start(ProcessRequest::Shell("exit 3"));
  ASSERT_TRUE(started.ok());
  LiveProcess& p = **started;
  struct pollfd fd = {p.exit_fd(), POLLIN, 0};
  if (p.exit_fd() >= 0) poll(&fd, 1, 5000);
  auto until = steady_clock::now() + std::chrono::seconds(5);
  while (!p.Exited() && steady_clock::now() < until) {
    poll(nullptr, 0, 20);
  }
  EXPECT_EQ(p.DescribeExit(), "exited with code 3");
  pid_t pid = p.pid();
  started->reset();
  EXPECT_TRUE(ProcessDead(pid));
}

TEST(LiveProcessTest, ACommandNotFoundIsAnError) {
  LocalProcessLauncher launcher;
  auto started =
      launcher.Start(ProcessRequest::Exec({"no-such-command-for-steps"}));
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("command not found"),
            std::string::npos)
      << started.status().message();
}

}  // namespace
}  // namespace steps
