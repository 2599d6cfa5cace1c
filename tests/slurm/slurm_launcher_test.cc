// SlurmLauncher against a real one-node Slurm cluster (scripts/slurm-up).
// Slurm schedules within about a second on an idle node; the bounds below
// are several times that, and each is stated where it is used.
#include "process/slurm_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/slurm_cluster.h"
#include "common/temp_dir.h"
#include "core/clock.h"
#include "process/local_launcher.h"

namespace steps {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using test_support::CommandOutput;
using test_support::TempDir;
using test_support::TestSlurmCluster;

std::string JobState(const std::string& id) {
  return ScontrolField(CommandOutput("scontrol show job -o " + id + " 2>&1"),
                       "JobState");
}

// Waits (at most `limit`) until the job is running, by asking Slurm.
bool WaitRunning(const std::string& name, std::string* id, Millis limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    std::string line =
        CommandOutput("squeue -h -n " + name + " -t RUNNING -o %i");
    if (!line.empty()) {
      *id = line;
      return true;
    }
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::string UniqueName(const char* what) {
  static std::atomic<int> n{0};
  return std::string("steps-test-") + what + "-" + std::to_string(getpid()) +
         "-" + std::to_string(n++);
}

class SlurmLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    STEPS_REQUIRE_SLURM();
    SlurmLauncherOptions o;
    o.spool_dir = dir_.path() + "/spool";
    slurm_ = std::make_unique<SlurmLauncher>(local_, RealClock(), o);
  }

  ProcessRequest Request(std::string command, const char* what) {
    ProcessRequest r = ProcessRequest::Shell(std::move(command));
    r.working_dir = dir_.path();
    r.cluster.emplace();
    r.cluster->job_name = UniqueName(what);
    return r;
  }

  TempDir dir_;
  LocalProcessLauncher local_;
  std::unique_ptr<SlurmLauncher> slurm_;
};

TEST_F(SlurmLauncherTest, RunsTheCommandAsAJobOnTheNode) {
  ProcessRequest r = Request(
      "echo \"out $GREETING $(pwd)\"; echo err >&2; read line; echo \"$line\";"
      " exit 3",
      "basic");
  r.env["GREETING"] = "hello";
  r.stdin_text = "from stdin\n";
  ProcessResult pr = slurm_->Run(r);
  ASSERT_EQ(pr.end, ProcessEnd::kExited) << pr.Describe();
  EXPECT_EQ(pr.exit_code, 3);
  EXPECT_EQ(pr.out.text, "out hello " + dir_.path() + "\nfrom stdin\n");
  EXPECT_EQ(pr.err.text, "err\n");
  ASSERT_TRUE(pr.cluster);
  EXPECT_FALSE(pr.cluster->job_id.empty());
  EXPECT_EQ(pr.cluster->node, TestSlurmCluster().node);
  EXPECT_FALSE(pr.cluster->limit_ended_it);
  // The run's spool folder is gone with it.
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/spool"));
}

TEST_F(SlurmLauncherTest, OutputStreamsWhileTheJobRuns) {
  ProcessRequest r = Request("echo first; sleep 3; echo second", "stream");
  std::mutex mu;
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>>
      lines;
  r.on_line = [&](OutputStream, std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(std::string(line), std::chrono::steady_clock::now());
  };
  ProcessResult pr = slurm_->Run(r);
  const auto end = std::chrono::steady_clock::now();
  ASSERT_TRUE(pr.succeeded()) << pr.Describe();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].first, "first");
  EXPECT_EQ(lines[1].first, "second");
  // The job sleeps 3 s between its lines: the first arrived while it ran
  // (allowing 1 s for the polls and the end).
  EXPECT_GT(end - lines[0].second, 2s);
}

TEST_F(SlurmLauncherTest, TheRunTimeoutEndsTheJobAndSaysItWasOurs) {
  ProcessRequest r = Request("echo started; sleep 120", "timeout");
  r.cluster->run_timeout = 2000ms;
  r.kill_grace = 1000ms;
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult pr = slurm_->Run(r);
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(pr.end, ProcessEnd::kTimedOut) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_FALSE(pr.cluster->limit_ended_it);
  EXPECT_EQ(pr.out.text, "started\n");
  // 2 s of run, queue time on top, the grace and Slurm's cancel: far
  // below the 120 s the command would take (bound: 30 s).
  EXPECT_LT(took, 30s);
  EXPECT_THAT(JobState(pr.cluster->job_id),
              ::testing::AnyOf("CANCELLED", "COMPLETED", "FAILED"));
}

// Slurm's own limit fires first when it is the shorter: here the job's
// limit is lowered to 1 minute while it runs (as an administrator may);
// Slurm checks its limits every 30 s or so, so this takes 60-100 s.
TEST_F(SlurmLauncherTest, SlurmsTimeLimitEndsTheJobAndSaysItWasSlurms) {
  ProcessRequest r = Request("echo started; sleep 600", "limit");
  r.cluster->run_timeout = 10min;
  ProcessResult pr;
  std::thread t([&] { pr = slurm_->Run(r); });
  std::string id;
  const bool running = WaitRunning(r.cluster->job_name, &id, 30000ms);
  if (running) {
    EXPECT_EQ(CommandOutput("scontrol update JobId=" + id + " TimeLimit=1"),
              "");
  }
  t.join();
  ASSERT_TRUE(running);
  EXPECT_EQ(pr.end, ProcessEnd::kTimedOut) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_TRUE(pr.cluster->limit_ended_it);
  EXPECT_EQ(pr.cluster->state, "TIMEOUT");
  EXPECT_THAT(pr.error, HasSubstr("time limit"));
  EXPECT_EQ(pr.out.text, "started\n");
}

// The node goes down under a running job whose first line has arrived
// (Slurm says RUNNING before the job script has run anything): the run is
// lost, not failed. The node is set back to `resume` whatever happens
// (with ReturnToService=2 it may be back already; scontrol then says the
// state is invalid, which is harmless).
TEST_F(SlurmLauncherTest, ANodeGoingDownLosesTheRun) {
  ProcessRequest r = Request("echo started; sleep 600", "nodefail");
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  r.on_line = [&](OutputStream, std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    started = started || line == "started";
    cv.notify_all();
  };
  ProcessResult pr;
  std::thread t([&] { pr = slurm_->Run(r); });
  bool running = false;
  {
    std::unique_lock<std::mutex> lock(mu);
    running = cv.wait_for(lock, 30s, [&] { return started; });
  }
  const std::string node = TestSlurmCluster().node;
  if (running) {
    CommandOutput("scontrol update nodename=" + node +
                  " state=down reason=steps-test");
  } else {
    CommandOutput("scancel -n " + r.cluster->job_name);
  }
  t.join();
  CommandOutput("scontrol update nodename=" + node + " state=resume 2>&1");
  ASSERT_TRUE(running);
  EXPECT_EQ(pr.end, ProcessEnd::kLost) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_EQ(pr.cluster->state, "NODE_FAIL");
  EXPECT_THAT(pr.error, HasSubstr("node " + node + " failed"));
  EXPECT_EQ(pr.out.text, "started\n");
}

// A command that ignores SIGTERM still ends: the job script outlives it,
// so Slurm's kill after the grace reaches it.
TEST_F(SlurmLauncherTest, ACommandIgnoringTermIsKilledAfterTheGrace) {
  const std::string pid_file = dir_.path() + "/pid";
  ProcessRequest r =
      Request("trap 'echo TERM-ignored' TERM; echo $$ > " + pid_file +
                  "; echo up; while :; do sleep 0.2; done",
              "stubborn");
  r.cluster->run_timeout = 2000ms;
  r.kill_grace = 1000ms;
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kTimedOut) << pr.Describe();
  std::ifstream in(pid_file);
  int pid = 0;
  ASSERT_TRUE(in >> pid);
  // Slurm's KillWait (5 s in scripts/slurm-up) after the cancel; bound 20 s.
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(100ms);
  EXPECT_NE(kill(pid, 0), 0) << "the command is still running";
  if (kill(pid, 0) == 0) kill(pid, SIGKILL);
}

TEST_F(SlurmLauncherTest, QueueTimeDoesNotCountAgainstTheRunTimeout) {
  // Held in the queue for 4 s by --begin, then runs 1 s under a 3 s
  // run timeout: it succeeds, and its queue time is recorded apart.
  ProcessRequest r = Request("sleep 1; echo done", "queued");
  r.cluster->extra = {"--begin=now+4"};
  r.cluster->run_timeout = 3000ms;
  ProcessResult pr = slurm_->Run(r);
  ASSERT_TRUE(pr.succeeded()) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_GE(pr.cluster->queued, 3000ms);
}

TEST_F(SlurmLauncherTest, TheDeadlineCountsTheQueue) {
  // The launcher's first run also probes the spool folder: done here first,
  // so that the deadline below is the held job's alone.
  ASSERT_TRUE(slurm_->Run(Request("true", "warm")).succeeded());
  ProcessRequest r = Request("echo never", "deadline");
  r.cluster->extra = {"--begin=now+600"};
  r.deadline = Deadline::After(RealClock(), 2000ms);
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kTimedOut) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_EQ(pr.cluster->node, "");
  EXPECT_GE(pr.cluster->queued, 2000ms);
  EXPECT_EQ(pr.out.text, "");
  // The pending job left the queue.
  EXPECT_EQ(JobState(pr.cluster->job_id), "CANCELLED");
}

TEST_F(SlurmLauncherTest, CancellingEndsRunningAndPendingJobs) {
  ProcessRequest running = Request("echo up; sleep 120", "cancel-run");
  ProcessRequest pending = Request("echo never", "cancel-pend");
  pending.cluster->extra = {"--begin=now+600"};
  CancelToken token;
  running.cancel = token;
  pending.cancel = token;
  std::atomic<bool> up{false};
  running.on_line = [&](OutputStream, std::string_view) { up = true; };
  ProcessResult pending_result;
  std::thread t([&] { pending_result = slurm_->Run(pending); });
  std::thread canceller([&] {
    while (!up) std::this_thread::sleep_for(20ms);
    token.Cancel(CancelReason::kAbort);
  });
  ProcessResult pr = slurm_->Run(running);
  canceller.join();
  t.join();
  EXPECT_EQ(pr.end, ProcessEnd::kCancelled) << pr.Describe();
  EXPECT_EQ(pending_result.end, ProcessEnd::kCancelled)
      << pending_result.Describe();
  // Neither is left in the queue.
  for (const ProcessResult* p : {&pr, &pending_result}) {
    ASSERT_TRUE(p->cluster);
    EXPECT_EQ(CommandOutput("squeue -h -j " + p->cluster->job_id +
                            " -t PENDING,RUNNING,COMPLETING -o %i 2>/dev/null"),
              "");
  }
}

TEST_F(SlurmLauncherTest, ARefusedSubmissionFailsToStartWithSlurmsWords) {
  ProcessRequest r = Request("echo never", "refused");
  r.cluster->partition = "no-such-partition";
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(pr.error, HasSubstr("partition"));
}

// More CPUs than the partition has: Slurm queues it and holds it pending
// for ever (reason PartitionConfig). The run fails to start, saying why.
TEST_F(SlurmLauncherTest, AJobSlurmCanNeverRunFailsToStart) {
  ProcessRequest r = Request("echo never", "never");
  r.cluster->cpus = 100000;
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart) << pr.Describe();
  EXPECT_THAT(pr.error, HasSubstr("reason PartitionConfig"));
  // Seen at the first question to Slurm, a second in (bound 20 s).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 20s);
  ASSERT_TRUE(pr.cluster);
  EXPECT_EQ(JobState(pr.cluster->job_id), "CANCELLED");
}

TEST_F(SlurmLauncherTest, AMissingWorkingDirectoryFailsToStart) {
  ProcessRequest r = Request("echo never", "nodir");
  r.working_dir = dir_.path() + "/absent";
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart) << pr.Describe();
  EXPECT_THAT(pr.error, HasSubstr("absent"));
}

}  // namespace
}  // namespace steps
