// Real subprocesses. Timing bounds are generous (several seconds) so that a
// loaded CI machine under sanitizers does not flake; the point is that a
// 30s sleep is not waited out.
#include "process/local_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "core/clock.h"

namespace steps {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Far below the 30s the sleeping commands would take.
constexpr Millis kQuick = 5000ms;

using test_support::TempDir;

// Dead means no /proc entry or a zombie nobody has reaped yet (in a
// container, init may never reap orphans).
bool ProcessDead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  if (!std::getline(stat, content)) return true;
  size_t close = content.rfind(')');
  if (close == std::string::npos || close + 2 >= content.size()) return true;
  char state = content[close + 2];
  return state == 'Z' || state == 'X';
}

// SIGKILL is delivered asynchronously to processes that no longer hold our
// pipes; give them a generous moment to finish dying.
bool ProcessDiesWithin(pid_t pid, Millis limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!ProcessDead(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class LocalLauncherTest : public ::testing::Test {
 protected:
  ProcessResult Shell(const std::string& command) {
    return launcher_.Run(ProcessRequest::Shell(command));
  }
  LocalProcessLauncher launcher_;
};

TEST_F(LocalLauncherTest, ExitCodes) {
  ProcessResult ok = Shell("true");
  EXPECT_EQ(ok.end, ProcessEnd::kExited);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_TRUE(ok.succeeded());
  EXPECT_GT(ok.pid, 0);

  ProcessResult three = Shell("exit 3");
  EXPECT_EQ(three.end, ProcessEnd::kExited);
  EXPECT_EQ(three.exit_code, 3);
  EXPECT_FALSE(three.succeeded());
  EXPECT_EQ(three.Describe(), "exited with code 3");
}

TEST_F(LocalLauncherTest, KilledBySignalIsNotAnExitCode) {
  ProcessResult r = Shell("kill -KILL $$");
  EXPECT_EQ(r.end, ProcessEnd::kSignaled);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.Describe(), "killed by signal 9 (SIGKILL)");
}

TEST_F(LocalLauncherTest, CapturesStdoutAndStderrSeparately) {
  ProcessResult r = Shell("echo out; echo err >&2; printf 'no newline'");
  EXPECT_EQ(r.out.text, "out\nno newline");
  EXPECT_EQ(r.err.text, "err\n");
  EXPECT_FALSE(r.out.truncated);
}

TEST_F(LocalLauncherTest, LineCallbackTagsStreams) {
  ProcessRequest request =
      ProcessRequest::Shell("echo one; echo two >&2; printf 'three'");
  std::vector<std::pair<OutputStream, std::string>> lines;
  request.on_line = [&](OutputStream stream, std::string_view line) {
    lines.emplace_back(stream, std::string(line));
  };
  launcher_.Run(request);
  ASSERT_EQ(lines.size(), 3u);
  std::vector<std::pair<OutputStream, std::string>> want = {
      {OutputStream::kStdout, "one"},
      {OutputStream::kStderr, "two"},
      {OutputStream::kStdout, "three"}};
  for (const auto& line : want) {
    EXPECT_NE(std::find(lines.begin(), lines.end(), line), lines.end())
        << line.second;
  }
}

TEST_F(LocalLauncherTest, MergedStderrKeepsOrder) {
  ProcessRequest request = ProcessRequest::Shell("echo a; echo b >&2; echo c");
  request.merge_stderr = true;
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.out.text, "a\nb\nc\n");
  EXPECT_EQ(r.err.text, "");
}

TEST_F(LocalLauncherTest, EnvironmentInheritOverrideUnsetAndExact) {
  LocalProcessLauncher launcher(RealClock(), {"PATH=/usr/bin:/bin", "KEEP=kept",
                                              "DROP=dropped", "OVER=old"});
  ProcessRequest request =
      ProcessRequest::Shell("echo \"$KEEP,${DROP-unset},$OVER,$NEW\"");
  request.env = {{"OVER", "new"}, {"NEW", "added"}};
  request.env_unset = {"DROP"};
  EXPECT_EQ(launcher.Run(request).out.text, "kept,unset,new,added\n");

  ProcessRequest exact =
      ProcessRequest::Exec({"/bin/sh", "-c", "echo \"${KEEP-unset},$ONLY\""});
  exact.inherit_env = false;
  exact.env = {{"ONLY", "this"}};
  EXPECT_EQ(launcher.Run(exact).out.text, "unset,this\n");
}

TEST_F(LocalLauncherTest, WorkingDirectory) {
  TempDir dir;
  ProcessRequest request = ProcessRequest::Shell("pwd -P");
  request.working_dir = dir.path();
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.out.text, std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST_F(LocalLauncherTest, MissingWorkingDirectoryFailsToStart) {
  ProcessRequest request = ProcessRequest::Shell("echo never");
  request.working_dir = "/nonexistent/steps/dir";
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(r.error, HasSubstr("/nonexistent/steps/dir"));
  EXPECT_THAT(r.error, HasSubstr("No such file"));
  EXPECT_EQ(r.pid, 0);
  EXPECT_FALSE(r.exit_code.has_value());
}

TEST_F(LocalLauncherTest, MissingProgramFailsToStart) {
  ProcessResult r =
      launcher_.Run(ProcessRequest::Exec({"no-such-program-for-steps"}));
  EXPECT_EQ(r.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(r.error, HasSubstr("no-such-program-for-steps"));
  ProcessResult direct =
      launcher_.Run(ProcessRequest::Exec({"/nonexistent/program"}));
  EXPECT_EQ(direct.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(direct.Describe(), HasSubstr("failed to start"));
}

TEST_F(LocalLauncherTest, MalformedEnvironmentFailsToStart) {
  ProcessRequest bad_name = ProcessRequest::Shell("true");
  bad_name.env["A=B"] = "x";
  ProcessResult r = launcher_.Run(bad_name);
  EXPECT_EQ(r.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(r.error, HasSubstr("'A=B'"));
  ProcessRequest bad_value = ProcessRequest::Shell("true");
  bad_value.env["A"] = std::string("x\0y", 3);
  EXPECT_EQ(launcher_.Run(bad_value).end, ProcessEnd::kFailedToStart);
}

TEST_F(LocalLauncherTest, StdinText) {
  ProcessRequest request = ProcessRequest::Exec({"cat"});
  request.stdin_text = "hello\nworld";
  EXPECT_EQ(launcher_.Run(request).out.text, "hello\nworld");

  ProcessRequest empty = ProcessRequest::Exec({"cat"});
  empty.stdin_text = "";
  EXPECT_EQ(launcher_.Run(empty).out.text, "");
}

TEST_F(LocalLauncherTest, LargeStdinLargerThanThePipe) {
  ProcessRequest request = ProcessRequest::Shell("wc -c");
  request.stdin_text = std::string(3 * 1024 * 1024, 'x');
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.out.text.substr(0, r.out.text.find_first_not_of("0123456789 ")),
            std::to_string(3 * 1024 * 1024));
}

TEST_F(LocalLauncherTest, ChildIgnoringStdinDoesNotRaiseSigpipe) {
  ProcessRequest request = ProcessRequest::Shell("exec 0<&-; echo done");
  request.stdin_text = std::string(1024 * 1024, 'x');
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.end, ProcessEnd::kExited);
  EXPECT_EQ(r.out.text, "done\n");
}

TEST_F(LocalLauncherTest, DeadlineKillsASleepQuickly) {
  ProcessRequest request = ProcessRequest::Shell("sleep 30");
  request.deadline = Deadline::After(RealClock(), 200ms);
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.end, ProcessEnd::kTimedOut);
  EXPECT_EQ(r.Describe(), "timed out");
  EXPECT_GE(r.duration, 190ms);
  EXPECT_LT(r.duration, kQuick);
  EXPECT_FALSE(r.escalated_to_kill);
  EXPECT_TRUE(ProcessDead(r.pid));
}

TEST_F(LocalLauncherTest, SigtermIgnoringChildIsKilledAfterGrace) {
  // Both bash and sleep ignore SIGTERM; say when the trap is in place so the
  // deadline can only hit after it.
  ProcessRequest request =
      ProcessRequest::Shell("trap '' TERM; echo armed; sleep 30; echo late");
  request.kill_grace = 300ms;
  std::atomic<bool> armed{false};
  request.on_line = [&](OutputStream, std::string_view line) {
    if (line == "armed") armed = true;
  };
  request.deadline = Deadline::After(RealClock(), 300ms);
  ProcessResult r = launcher_.Run(request);
  EXPECT_TRUE(armed);
  EXPECT_EQ(r.end, ProcessEnd::kTimedOut);
  EXPECT_TRUE(r.escalated_to_kill);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_GE(r.duration, 550ms);  // Deadline plus grace, minus rounding.
  EXPECT_LT(r.duration, kQuick);
  EXPECT_EQ(r.out.text, "armed\n");
}

TEST_F(LocalLauncherTest, CancellationFromAnotherThread) {
  CancelToken token;
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  ProcessRequest request = ProcessRequest::Shell("echo started; sleep 30");
  request.cancel = token;
  request.on_line = [&](OutputStream, std::string_view) {
    std::lock_guard<std::mutex> lock(mu);
    started = true;
    cv.notify_all();
  };
  std::thread canceller([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started; });
    token.Cancel(CancelReason::kAbort);
  });
  ProcessResult r = launcher_.Run(request);
  canceller.join();
  EXPECT_EQ(r.end, ProcessEnd::kCancelled);
  EXPECT_LT(r.duration, kQuick);
  EXPECT_EQ(r.term_signal, SIGTERM);
}

TEST_F(LocalLauncherTest, ThrowingLineCallbackStillKillsTheGroup) {
  ProcessRequest request =
      ProcessRequest::Shell("sleep 1000 & echo $!; echo boom; sleep 30");
  pid_t straggler = 0;
  request.on_line = [&](OutputStream, std::string_view line) {
    if (line == "boom") throw std::runtime_error("observer failed");
    straggler = std::stoi(std::string(line));
  };
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(launcher_.Run(request), std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kQuick);
  ASSERT_GT(straggler, 0);
  EXPECT_TRUE(ProcessDiesWithin(straggler, kQuick));
}

TEST_F(LocalLauncherTest, AlreadyCancelledOrExpiredRunsNothing) {
  ProcessRequest request = ProcessRequest::Shell("echo never");
  request.cancel.Cancel(CancelReason::kAbort);
  ProcessResult cancelled = launcher_.Run(request);
  EXPECT_EQ(cancelled.end, ProcessEnd::kCancelled);
  EXPECT_EQ(cancelled.pid, 0);

  ProcessRequest late = ProcessRequest::Shell("echo never");
  late.deadline = Deadline::At(RealClock().Now() - 1ms);
  ProcessResult expired = launcher_.Run(late);
  EXPECT_EQ(expired.end, ProcessEnd::kTimedOut);
  EXPECT_EQ(expired.out.text, "");
}

TEST_F(LocalLauncherTest, BackgroundedChildHoldingThePipesDoesNotOutliveRun) {
  // The backgrounded sleep keeps stdout open; the run must neither wait for
  // it nor leave it alive.
  ProcessResult r = Shell("sleep 1000 & echo $!; exit 0");
  EXPECT_EQ(r.end, ProcessEnd::kExited);
  EXPECT_LT(r.duration, kQuick);
  pid_t straggler = std::stoi(r.out.text);
  // It got SIGKILL before Run returned; its pipes closed early in its exit,
  // so it may take a moment more to show as dead.
  EXPECT_TRUE(ProcessDiesWithin(straggler, kQuick));
  EXPECT_TRUE(ProcessDead(r.pid));
}

TEST_F(LocalLauncherTest, BackgroundedChildWithoutPipesIsKilledToo) {
  ProcessResult r = Shell("sleep 1000 >/dev/null 2>&1 & echo $!");
  pid_t straggler = std::stoi(r.out.text);
  EXPECT_LT(r.duration, kQuick);
  EXPECT_TRUE(ProcessDiesWithin(straggler, kQuick));
}

TEST_F(LocalLauncherTest, TimeoutKillsTheWholeGroup) {
  ProcessRequest request =
      ProcessRequest::Shell("sleep 1000 & echo $!; sleep 30");
  request.deadline = Deadline::After(RealClock(), 300ms);
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.end, ProcessEnd::kTimedOut);
  EXPECT_LT(r.duration, kQuick);
  EXPECT_TRUE(ProcessDiesWithin(std::stoi(r.out.text), kQuick));
}

TEST_F(LocalLauncherTest, EscapedProcessHoldingPipesDoesNotHangTheRun) {
  // setsid leaves the group; only the drain timeout bounds the wait. The
  // fifo makes bash exit only once the escape has happened.
  TempDir dir;
  ProcessRequest request = ProcessRequest::Shell(
      "mkfifo f; setsid sh -c 'echo $$ > f; exec sleep 1000' & "
      "read pid < f; echo $pid; exit 0");
  request.working_dir = dir.path();
  request.drain_timeout = 200ms;
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.end, ProcessEnd::kExited);
  EXPECT_GE(r.duration, 190ms);   // It did wait for the drain timeout...
  EXPECT_LT(r.duration, kQuick);  // ... and no longer.
  pid_t escaped = std::stoi(r.out.text);
  kill(escaped, SIGKILL);  // Out of reach by design; clean up here.
  EXPECT_TRUE(ProcessDiesWithin(escaped, kQuick));
}

TEST_F(LocalLauncherTest, OutputCapKeepsHeadAndFlagsTheCut) {
  ProcessRequest request =
      ProcessRequest::Shell("head -c 100000 /dev/zero | tr '\\0' a");
  request.max_captured_bytes = 1000;
  size_t streamed = 0;
  request.on_line = [&](OutputStream, std::string_view line) {
    streamed += line.size();
  };
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.out.text, std::string(1000, 'a'));
  EXPECT_EQ(r.out.total_bytes, 100000u);
  EXPECT_TRUE(r.out.truncated);
  EXPECT_EQ(streamed, 100000u);  // The callback still saw everything.
}

TEST_F(LocalLauncherTest, OutputCapKeepsTail) {
  ProcessRequest request = ProcessRequest::Shell("seq 1 20000");
  request.max_captured_bytes = 12;
  request.keep = OutputKeep::kTail;
  ProcessResult r = launcher_.Run(request);
  EXPECT_EQ(r.out.text, "19999\n20000\n");
  EXPECT_TRUE(r.out.truncated);
}

// The path for kernels without pidfd_open: the child's state is checked
// on a short interval instead.
TEST(LocalLauncherWithoutPidfdTest, ExitsDeadlinesAndStragglers) {
  std::vector<std::string> env;
  for (char** e = ::environ; *e; ++e) env.emplace_back(*e);  // unistd.h
  LocalProcessLauncher launcher(RealClock(), env, {.use_pidfd = false});

  ProcessResult exited = launcher.Run(ProcessRequest::Shell("echo hi; exit 4"));
  EXPECT_EQ(exited.end, ProcessEnd::kExited);
  EXPECT_EQ(exited.exit_code, 4);
  EXPECT_EQ(exited.out.text, "hi\n");

  ProcessRequest slow = ProcessRequest::Shell("sleep 1000 & echo $!; sleep 30");
  slow.deadline = Deadline::After(RealClock(), 200ms);
  ProcessResult timed_out = launcher.Run(slow);
  EXPECT_EQ(timed_out.end, ProcessEnd::kTimedOut);
  EXPECT_LT(timed_out.duration, kQuick);
  EXPECT_TRUE(ProcessDiesWithin(std::stoi(timed_out.out.text), kQuick));

  // A child that closes its pipes early is still seen to exit.
  ProcessResult quiet =
      launcher.Run(ProcessRequest::Shell("exec >&- 2>&-; sleep 0.05; exit 2"));
  EXPECT_EQ(quiet.end, ProcessEnd::kExited);
  EXPECT_EQ(quiet.exit_code, 2);
}

TEST_F(LocalLauncherTest, HundredConcurrentRuns) {
  constexpr int kRuns = 100;
  std::vector<ProcessResult> results(kRuns);
  std::vector<std::thread> threads;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      ProcessRequest request =
          ProcessRequest::Shell("echo $N; echo e$N >&2; exit $((N % 7))");
      request.env["N"] = std::to_string(i);
      results[i] = launcher_.Run(request);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_EQ(results[i].end, ProcessEnd::kExited) << i;
    EXPECT_EQ(results[i].exit_code, i % 7) << i;
    EXPECT_EQ(results[i].out.text, std::to_string(i) + "\n") << i;
    EXPECT_EQ(results[i].err.text, "e" + std::to_string(i) + "\n") << i;
  }
  // Generous: 100 bash starts take well under a second unloaded.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

TEST_F(LocalLauncherTest, ConcurrentTimeoutsAllEndPromptly) {
  constexpr int kRuns = 20;
  std::vector<ProcessResult> results(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      ProcessRequest request = ProcessRequest::Shell("sleep 30");
      request.deadline = Deadline::After(RealClock(), 100ms);
      results[i] = launcher_.Run(request);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const ProcessResult& r : results) {
    EXPECT_EQ(r.end, ProcessEnd::kTimedOut);
    EXPECT_LT(r.duration, kQuick);
  }
}

}  // namespace
}  // namespace steps
