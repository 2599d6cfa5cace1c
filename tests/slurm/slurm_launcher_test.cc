// SlurmLauncher against a real one-node Slurm cluster (scripts/slurm-up).
// Slurm schedules within about a second on an idle node; the bounds below
// are several times that, and each is stated where it is used.
#include "process/slurm_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log_capture.h"
#include "common/slurm_cluster.h"
#include "common/temp_dir.h"
#include "core/clock.h"
#include "core/fiber.h"
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
    slurm_ = std::make_unique<SlurmLauncher>(local_, RealClock(), Options());
  }

  // Options with the spool folder under the test's folder.
  SlurmLauncherOptions Options() const {
    SlurmLauncherOptions o;
    o.spool_dir = dir_.path() + "/spool";
    return o;
  }

  // Writes the executable script DIR/NAME (a stand-in for a Slurm command):
  // `body` after the shebang line. Its path.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }

  // The line that ends such a script by running the real `command`.
  static std::string ExecReal(const std::string& command) {
    return "exec " + CommandOutput("command -v " + command) + " \"$@\"\n";
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

// The spool folder's path is the user's (under --state-dir): quotes, a
// '%', a dollar and spaces in it reach Slurm and the job script as they
// are, its TERM trap included (the command ends on the TERM passed on to
// it, with no kill after the grace). A backslash, which Slurm cannot take
// in an output path, is refused in those words, not blamed on the nodes.
TEST_F(SlurmLauncherTest, ASpoolPathAShellWouldMisreadIsQuoted) {
  SlurmLauncherOptions o;
  o.spool_dir = dir_.path() + "/it's \"a\" 100%j $HOME";
  SlurmLauncher slurm(local_, RealClock(), o);
  ProcessResult ran = slurm.Run(Request("echo hi", "odd-spool"));
  EXPECT_TRUE(ran.succeeded()) << ran.Describe();
  EXPECT_EQ(ran.out.text, "hi\n");
  ProcessRequest r = Request("echo started; sleep 120", "odd-spool-term");
  r.cluster->run_timeout = 2000ms;
  r.kill_grace = 10'000ms;
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult pr = slurm.Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kTimedOut) << pr.Describe();
  EXPECT_EQ(pr.out.text, "started\n");
  EXPECT_FALSE(pr.escalated_to_kill);
  // 2 s of run and the queue; the TERM ends it well within the grace
  // (bound: 30 s).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 30s);

  o.spool_dir = dir_.path() + "/back\\slash";
  SlurmLauncher refusing(local_, RealClock(), o);
  ProcessResult refused = refusing.Run(Request("echo never", "backslash"));
  EXPECT_EQ(refused.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(refused.error, HasSubstr("reads a backslash in a job's output "
                                       "path as an escape"));
  EXPECT_THAT(refused.error, ::testing::Not(HasSubstr("cannot see")));
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

// A job held in the queue past its time to start leaves the queue and
// fails to start, saying so; one already past it is never submitted.
TEST_F(SlurmLauncherTest, AJobStillQueuedAtItsTimeToStartLeavesTheQueue) {
  ASSERT_TRUE(slurm_->Run(Request("true", "warm")).succeeded());
  ProcessRequest r = Request("echo never", "start-by");
  r.cluster->extra = {"--begin=now+600"};
  r.cluster->run_timeout = 60'000ms;
  r.cluster->start_by = Deadline::After(RealClock(), 2000ms);
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_TRUE(pr.cluster->start_by_passed);
  EXPECT_THAT(pr.error, HasSubstr("was still in Slurm's queue when its time "
                                  "to start on a node passed"));
  EXPECT_GE(pr.cluster->queued, 2000ms);
  // Seen within a poll of the time (bound: 20 s, Slurm's cancel included).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 20s);
  EXPECT_EQ(pr.out.text, "");
  EXPECT_EQ(JobState(pr.cluster->job_id), "CANCELLED");

  ProcessRequest late = Request("echo never", "start-by-late");
  late.cluster->start_by = Deadline::After(RealClock(), -1ms);
  ProcessResult never = slurm_->Run(late);
  EXPECT_EQ(never.end, ProcessEnd::kFailedToStart);
  ASSERT_TRUE(never.cluster);
  EXPECT_TRUE(never.cluster->start_by_passed);
  EXPECT_EQ(never.cluster->job_id, "");
}

// A job Slurm starts in the moment its time to start passes ran: it runs
// on, and is not recorded as one that never started. The scancel below
// has Slurm start the held job first, then cancels as asked (the cancel of
// a job still pending alone then finds it running).
TEST_F(SlurmLauncherTest, AJobStartedAsItsTimeToStartPassesRunsOn) {
  SlurmLauncherOptions o = Options();
  o.scancel =
      Script("scancel",
             "if [ \"$1\" = --state=PENDING ]; then\n"
             "  scontrol release \"$2\"\n"
             "  i=0\n"
             "  while [ $i -lt 600 ] && [ \"$(squeue -h -j \"$2\" -o %T)\" != "
             "RUNNING ]; do sleep 0.1; i=$((i+1)); done\n"
             "fi\n" +
                 ExecReal("scancel"));
  SlurmLauncher slurm(local_, RealClock(), o);
  ASSERT_TRUE(slurm.Run(Request("true", "warm")).succeeded());
  ProcessRequest r = Request("sleep 1; echo ran", "start-by-race");
  r.cluster->extra = {"--hold"};
  r.cluster->start_by = Deadline::After(RealClock(), 2000ms);
  ProcessResult pr = slurm.Run(r);
  EXPECT_TRUE(pr.succeeded()) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_FALSE(pr.cluster->start_by_passed);
  EXPECT_EQ(pr.out.text, "ran\n");
  EXPECT_NE(pr.cluster->node, "");
  EXPECT_GE(pr.cluster->queued, 2000ms);
  EXPECT_THAT(JobState(pr.cluster->job_id),
              ::testing::AnyOf("COMPLETED", "COMPLETING"));
}

// An squeue that hangs is cut at the job's time to start: the job leaves
// the queue then, not when the question's own 5 s run out (6 s in).
TEST_F(SlurmLauncherTest, AHangingSqueueDoesNotDelayTheTimeToStart) {
  SlurmLauncherOptions o = Options();
  o.squeue = Script("squeue", "exec sleep 60\n");
  SlurmLauncher slurm(local_, RealClock(), o);
  // The shared-folder probe first (its watch waits out the hung squeue).
  ASSERT_TRUE(slurm.Run(Request("true", "warm")).succeeded());
  ProcessRequest r = Request("echo never", "hung-squeue");
  r.cluster->extra = {"--begin=now+600"};
  const auto begin = std::chrono::steady_clock::now();
  r.cluster->start_by = Deadline::After(RealClock(), 2000ms);
  ProcessResult pr = slurm.Run(r);
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart) << pr.Describe();
  ASSERT_TRUE(pr.cluster);
  EXPECT_TRUE(pr.cluster->start_by_passed);
  // 2 s, then a cancel and a question to scontrol (bound: 5 s, below the
  // 6 s the hung question would take).
  EXPECT_LT(took, 5s);
  EXPECT_EQ(JobState(pr.cluster->job_id), "CANCELLED");
}

// Jobs waiting and running at once are asked after with one squeue a
// state_poll between them, not one each: 6 jobs held 4 s in the queue
// would ask about 30 times on their own.
TEST_F(SlurmLauncherTest, WatchedJobsShareOneQuestionToSlurm) {
  const std::string log = dir_.path() + "/asked";
  SlurmLauncherOptions o = Options();
  o.squeue =
      Script("squeue", "echo \"$@\" >> " + log + "\n" + ExecReal("squeue"));
  SlurmLauncher slurm(local_, RealClock(), o);
  ASSERT_TRUE(slurm.Run(Request("true", "warm")).succeeded());
  constexpr int kJobs = 6;
  std::vector<ProcessResult> results(kJobs);
  std::vector<std::thread> threads;
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    threads.emplace_back([&, i] {
      ProcessRequest r = Request("echo ran", "shared-poll");
      r.cluster->extra = {"--begin=now+4"};
      results[i] = slurm.Run(r);
    });
  }
  for (std::thread& t : threads) t.join();
  const auto took = std::chrono::steady_clock::now() - begin;
  for (const ProcessResult& r : results) {
    EXPECT_TRUE(r.succeeded()) << r.Describe();
    EXPECT_EQ(r.out.text, "ran\n");
  }
  std::ifstream in(log);
  std::vector<std::string> asked;
  for (std::string line; std::getline(in, line);) asked.push_back(line);
  // One a second while any waits (bound: the seconds taken plus 2).
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(took).count();
  EXPECT_LE(static_cast<long>(asked.size()), seconds + 2);
  EXPECT_GE(asked.size(), 2u);
  // Each question asked of every job then waiting.
  size_t most = 0;
  for (const std::string& a : asked) {
    const size_t from = a.find("--jobs=");
    ASSERT_NE(from, std::string::npos) << a;
    const std::string jobs = a.substr(from, a.find(' ', from) - from);
    most =
        std::max<size_t>(most, std::count(jobs.begin(), jobs.end(), ',') + 1);
  }
  EXPECT_EQ(most, static_cast<size_t>(kJobs));
}

// Runs on fibers that all arrive before the shared-folder probe has
// answered wait for it parked, not blocking their carriers: with the
// probe's lock held across it, 70 such runs (a 70-cell across) took every
// carrier and hung for good.
TEST_F(SlurmLauncherTest, RunsOnFibersWaitForTheProbeWithoutHanging) {
  constexpr int kRuns = 70;
  std::mutex mu;
  std::condition_variable all_done;
  int done = 0;
  std::vector<ProcessResult> results(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_TRUE(SharedFiberPool().Spawn([&, i] {
      results[i] = slurm_->Run(Request("echo ok", "fibers"));
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      all_done.notify_all();
    }));
  }
  std::unique_lock<std::mutex> lock(mu);
  // Bound: 60 s for 70 one-line jobs on 8 CPUs (about 7 s here).
  ASSERT_TRUE(all_done.wait_for(lock, 60s, [&] { return done == kRuns; }))
      << done << " of " << kRuns << " runs ended";
  for (const ProcessResult& r : results) {
    EXPECT_TRUE(r.succeeded()) << r.Describe();
    EXPECT_EQ(r.out.text, "ok\n");
  }
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

// A submission refused for what it asks would be refused again
// (cannot_run: not retried); one Slurm was too busy to take may pass.
TEST_F(SlurmLauncherTest, ARefusedSubmissionFailsToStartWithSlurmsWords) {
  ProcessRequest r = Request("echo never", "refused");
  r.cluster->partition = "no-such-partition";
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(pr.error, HasSubstr("partition"));
  ASSERT_TRUE(pr.cluster);
  EXPECT_TRUE(pr.cluster->cannot_run);
  EXPECT_EQ(pr.cluster->job_id, "");

  SlurmLauncherOptions o = Options();
  o.sbatch = Script("sbatch",
                    "case \"$*\" in *transient*)\n"
                    "  echo 'sbatch: error: Batch job submission failed: "
                    "Socket timed out on send/recv operation' >&2; exit 1;;\n"
                    "esac\n" +
                        ExecReal("sbatch"));
  SlurmLauncher busy(local_, RealClock(), o);
  ProcessResult transient = busy.Run(Request("echo never", "transient"));
  EXPECT_EQ(transient.end, ProcessEnd::kFailedToStart);
  EXPECT_THAT(transient.error, HasSubstr("Socket timed out"));
  ASSERT_TRUE(transient.cluster);
  EXPECT_FALSE(transient.cluster->cannot_run);
}

// More CPUs than the partition has: Slurm queues it and holds it pending
// for ever (reason PartitionConfig). The run fails to start, saying why.
TEST_F(SlurmLauncherTest, AJobSlurmCanNeverRunFailsToStart) {
  ProcessRequest r = Request("echo never", "never");
  r.cluster->cpus = 100000;
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart) << pr.Describe();
  EXPECT_THAT(pr.error, HasSubstr("reason PartitionConfig (it asks more "
                                  "than the partition allows)"));
  // Seen at the first question to Slurm, a second in (bound 20 s).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 20s);
  ASSERT_TRUE(pr.cluster);
  EXPECT_TRUE(pr.cluster->cannot_run);
  EXPECT_EQ(JobState(pr.cluster->job_id), "CANCELLED");
}

// A dependency that can never be met (on a job that failed) holds the job
// for ever: it fails to start at once, saying why.
TEST_F(SlurmLauncherTest, ADependencyNeverSatisfiedFailsToStart) {
  ProcessResult failed = slurm_->Run(Request("exit 3", "dep-failed"));
  ASSERT_EQ(failed.end, ProcessEnd::kExited) << failed.Describe();
  ASSERT_TRUE(failed.cluster);
  ProcessRequest r = Request("echo never", "dep");
  r.cluster->extra = {"--dependency=afterok:" + failed.cluster->job_id};
  r.deadline = Deadline::After(RealClock(), 60'000ms);
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kFailedToStart) << pr.Describe();
  EXPECT_THAT(pr.error,
              HasSubstr("reason DependencyNeverSatisfied (a job it depends "
                        "on ended in a way that can never satisfy its "
                        "dependency)"));
  // Bound 20 s: Slurm says so at its next pass, about a second in.
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 20s);
  ASSERT_TRUE(pr.cluster);
  EXPECT_TRUE(pr.cluster->cannot_run);
  EXPECT_EQ(JobState(pr.cluster->job_id), "CANCELLED");
}

// A held job waits for a person: said once in the log, with the command
// that releases it.
TEST_F(SlurmLauncherTest, AHeldJobIsSaidOnce) {
  ASSERT_TRUE(slurm_->Run(Request("true", "warm")).succeeded());
  test_support::LogCapture log;
  ProcessRequest r = Request("echo never", "held");
  r.cluster->extra = {"--hold"};
  r.deadline = Deadline::After(RealClock(), 3500ms);
  ProcessResult pr = slurm_->Run(r);
  EXPECT_EQ(pr.end, ProcessEnd::kTimedOut) << pr.Describe();
  const std::vector<std::string> held = log.LinesWith("slurm.job_held");
  ASSERT_EQ(held.size(), 1u);
  ASSERT_TRUE(pr.cluster);
  EXPECT_THAT(held[0], HasSubstr("job=" + pr.cluster->job_id));
  EXPECT_THAT(held[0], HasSubstr("reason=JobHeldUser"));
  EXPECT_THAT(held[0], HasSubstr("scontrol release " + pr.cluster->job_id));
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
