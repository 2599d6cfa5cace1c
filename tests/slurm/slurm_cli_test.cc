// `runner: slurm` from the outside: the real `steps` binary running
// pipelines on the one-node cluster of scripts/slurm-up. Slurm starts a job
// within about a second on an idle node; every bound below is several times
// what it needs, and says so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/slurm_cluster.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using test_support::CommandOutput;
using test_support::RunSteps;
using test_support::SpawnSteps;
using test_support::TempDir;
using test_support::TestSlurmCluster;
using test_support::WaitForExit;
using Millis = std::chrono::milliseconds;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits (at most `limit`) until `path` holds `text` `times` times.
bool WaitForText(const std::string& path, const std::string& text, Millis limit,
                 int times = 1) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    const std::string all = ReadAll(path);
    int seen = 0;
    for (size_t at = all.find(text); at != std::string::npos;
         at = all.find(text, at + 1))
      ++seen;
    if (seen >= times) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The Slurm job ids `steps show --json` recorded for the run's attempts.
std::vector<std::string> RecordedJobs(const std::string& dir) {
  const std::string json = RunSteps(dir, "show --json").out;
  std::vector<std::string> ids;
  static const std::regex kJob("\"slurm_job\":\\s*\"([0-9]+)\"");
  for (std::sregex_iterator it(json.begin(), json.end(), kJob), end; it != end;
       ++it)
    ids.push_back((*it)[1]);
  return ids;
}

// Jobs among `ids` that Slurm still has queued or running.
std::string StillQueued(const std::vector<std::string>& ids) {
  std::string list;
  for (const std::string& id : ids) list += (list.empty() ? "" : ",") + id;
  if (list.empty()) return "";
  return CommandOutput("squeue -h -j " + list +
                       " -t PENDING,RUNNING,COMPLETING,SUSPENDED -o %i "
                       "2>/dev/null");
}

class SlurmCliTest : public ::testing::Test {
 protected:
  void SetUp() override { STEPS_REQUIRE_SLURM(); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path() + "/" + name) << text;
  }

  // DIR/bin/sbatch: the real sbatch, but its jobs do not carry this run's
  // process scope (on a one-node cluster the guardian's sweep of the scope
  // would otherwise end their processes itself, and hide whether the jobs
  // were cancelled). With `hold`, once a step's job is queued its id goes
  // to DIR/submitted and the answer waits 60 s. Returns the folder.
  std::string FakeSbatch(bool hold) {
    const std::string real = CommandOutput("command -v sbatch");
    EXPECT_FALSE(real.empty());
    const std::string bin = dir_.path() + "/bin";
    std::filesystem::create_directories(bin);
    std::string script = "#!/bin/bash\nout=$(env -u STEPS_PROCESS_SCOPE " +
                         real + " \"$@\") || exit $?\n";
    if (hold) {
      script +=
          "case \"$*\" in *--job-name=steps-probe*) ;;\n"
          "  *) echo \"$out\" > " +
          dir_.path() + "/submitted; sleep 60 ;;\nesac\n";
    }
    Write("bin/sbatch", script + "echo \"$out\"\n");
    std::filesystem::permissions(bin + "/sbatch",
                                 std::filesystem::perms::owner_all);
    return bin;
  }

  // Starts `steps ARGS` with `bin` first in its PATH.
  pid_t SpawnWithPath(const std::string& bin,
                      const std::vector<std::string>& args,
                      const std::string& log) {
    const std::string path = getenv("PATH");
    setenv("PATH", (bin + ":" + path).c_str(), 1);
    pid_t pid = SpawnSteps(dir_.path(), args, log);
    setenv("PATH", path.c_str(), 1);
    return pid;
  }

  TempDir dir_;
};

TEST_F(SlurmCliTest, ATaskRunsAsASlurmJobAndSaysWhere) {
  Write("p.yaml", R"(
defaults:
  runner: slurm
jobs:
  - name: build
    plan:
      - task: hello
        run: echo "node=$SLURMD_NODENAME job=$SLURM_JOB_ID step=$STEPS_STEP"
)");
  test_support::CliResult r = RunSteps(dir_.path(), "run p.yaml --plain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string node = TestSlurmCluster().node;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex("node=" + node + " job=([0-9]+) step=hello")))
      << r.out;
  const std::string job = m[1];
  const std::string shown = RunSteps(dir_.path(), "show").out;
  EXPECT_THAT(shown, HasSubstr("@" + node + " (slurm job " + job + ")"))
      << shown;
  EXPECT_THAT(shown, HasSubstr("Queued: "));
  EXPECT_EQ(RecordedJobs(dir_.path()), std::vector<std::string>{job});
}

// A Slurm job gets the environment a local task gets: provider keys are
// withheld unless `env:` passes them, and secrets are masked in its output.
TEST_F(SlurmCliTest, AJobSeesNoProviderKeyAndItsSecretsAreMasked) {
  Write("p.yaml", R"(
secrets: [DEPLOY_TOKEN]
defaults:
  runner: slurm
jobs:
  - name: keys
    plan:
      - task: look
        run: echo "key=${OPENAI_API_KEY:-withheld} token=$DEPLOY_TOKEN"
)");
  test_support::StepsOptions env;
  env.prefix = "OPENAI_API_KEY=sk-not-for-tasks DEPLOY_TOKEN=hunter2-token";
  test_support::CliResult r =
      RunSteps(dir_.path(), "run p.yaml --plain --no-cache", env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("look | key=withheld token=***"));
  EXPECT_THAT(r.out, Not(HasSubstr("sk-not-for-tasks")));
  EXPECT_THAT(r.out, Not(HasSubstr("hunter2-token")));
}

TEST_F(SlurmCliTest, QueueTimeCountsOnlyWhereTheStepSaysSo) {
  // Each task is held 4 s in the queue by --begin, then runs 0.5 s under a
  // 3 s timeout: the first succeeds, the second (queue counted) times out.
  Write("p.yaml", R"(
defaults:
  runner: slurm
  slurm: {extra: ["--begin=now+4"]}
jobs:
  - name: apart
    plan:
      - task: waits
        timeout: 3s
        run: sleep 0.5; echo ran
  - name: counted
    plan:
      - task: waits
        timeout: 3s
        slurm: {timeout_includes_queue: true}
        run: sleep 0.5; echo ran
)");
  test_support::CliResult r =
      RunSteps(dir_.path(), "run p.yaml --plain --no-cache");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("job apart succeeded"));
  EXPECT_THAT(r.out,
              HasSubstr("STEP_TIMEOUT: Step 'waits' timed out after 3000ms"));
  EXPECT_EQ(StillQueued(RecordedJobs(dir_.path())), "");
  const std::string explained = RunSteps(dir_.path(), "explain p.yaml").out;
  EXPECT_THAT(explained, HasSubstr("queue time         not counted"));
  EXPECT_THAT(explained, HasSubstr("queue time         counted"));
  EXPECT_THAT(explained, HasSubstr("plus time in Slurm's queue"));
}

// The job's own deadline counts the queue: a task's job and the cells of
// an across, held in the queue past a job's 3 s timeout, never start, leave
// the queue, and say why; what follows in the job is not started.
TEST_F(SlurmCliTest, WhatIsStillQueuedAtTheJobsDeadlineNeverStarts) {
  Write("p.yaml", R"(
defaults:
  runner: slurm
  slurm: {extra: ["--begin=now+600"]}
jobs:
  - name: task
    timeout: 3s
    plan:
      - task: held
        timeout: 1s
        attempts: 3
        run: echo never
      - task: next
        runner: local
        run: echo never
  - name: cells
    timeout: 3s
    plan:
      - across:
          - { var: n, values: [a, b] }
        runner: slurm
        do:
          - task: inside
            run: echo never
)");
  char suffix[8];
  snprintf(suffix, sizeof suffix, "%04x",
           static_cast<unsigned>(getpid()) & 0xffff);
  const std::string run_id = std::string("20261207-120000-") + suffix;
  const auto begin = std::chrono::steady_clock::now();
  test_support::CliResult r =
      RunSteps(dir_.path(), "run p.yaml --plain --no-cache --run-id " + run_id);
  // 3 s, a poll and the cancels: far from 600 s (bound 60 s).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 60s);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("| never")));
  const std::string json = RunSteps(dir_.path(), "show --json").out;
  EXPECT_THAT(json, HasSubstr("job 'task' passed its timeout of 3s while "
                              "this attempt's Slurm job was queued"));
  EXPECT_THAT(json, HasSubstr("\"job_timeout\""));
  EXPECT_THAT(json, HasSubstr("job 'cells' passed its timeout of 3s while "
                              "this cell's Slurm job was queued"));
  // One attempt of 'held', none of the cells' steps, none of 'next'.
  EXPECT_EQ(RecordedJobs(dir_.path()).size(), 1u);
  // Nothing of the run is left in the queue (its jobs carry its tag).
  EXPECT_EQ(CommandOutput("squeue -h -o %k 2>/dev/null | grep -c -F "
                          "'steps-run:" +
                          run_id + "' || true"),
            "0");
}

TEST_F(SlurmCliTest, TheTimeoutEndsARunningJob) {
  Write("p.yaml", R"(
jobs:
  - name: slow
    runner: slurm
    plan:
      - task: sleeps
        timeout: 2s
        run: echo started; sleep 300
)");
  const auto begin = std::chrono::steady_clock::now();
  test_support::CliResult r =
      RunSteps(dir_.path(), "run p.yaml --plain --no-cache");
  // 2 s, the queue, the 2 s grace and scancel: far from 300 s (bound 60 s).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 60s);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("sleeps | started"));
  EXPECT_THAT(r.out,
              HasSubstr("STEP_TIMEOUT: Step 'sleeps' timed out after 2000ms"));
  EXPECT_EQ(StillQueued(RecordedJobs(dir_.path())), "");
}

TEST_F(SlurmCliTest, AnAbortCancelsRunningAndPendingJobs) {
  Write("p.yaml", R"(
defaults:
  runner: slurm
jobs:
  - name: abort
    plan:
      - in_parallel:
          - task: running
            run: echo up; sleep 300
          - task: pending
            slurm: {extra: ["--begin=now+600"]}
            run: echo never
)");
  const std::string log = dir_.path() + "/log";
  pid_t pid =
      SpawnSteps(dir_.path(), {"run", "p.yaml", "--plain", "--no-cache"}, log);
  ASSERT_GT(pid, 0);
  // Running once its line is out (bound 60 s).
  const bool up = WaitForText(log, "running | up", 60000ms);
  kill(pid, SIGINT);
  const int code = WaitForExit(pid, 60000ms);
  if (pid > 0) kill(pid, SIGKILL);
  ASSERT_TRUE(up) << ReadAll(log);
  EXPECT_EQ(code, 130) << ReadAll(log);
  const std::vector<std::string> jobs = RecordedJobs(dir_.path());
  EXPECT_EQ(jobs.size(), 2u);
  EXPECT_EQ(StillQueued(jobs), "");
}

// An across block with `runner: slurm`: each cell is one Slurm job running
// steps on the node, agent steps included (here against the file's mock,
// which each cell serves from its start); this run alone records them.
TEST_F(SlurmCliTest, AcrossCellsWithAnAgentRunOnTheNode) {
  Write("p.yaml", R"yaml(
agents:
  - name: reviewer
    source: { model: mock/reviewer }
    max_turns: 2
jobs:
  - name: cells
    plan:
      - across:
          - { var: n, values: [a, b, c, d], max_in_flight: 2 }
        runner: slurm
        do:
          - task: where
            run: echo "cell $n job=$SLURM_JOB_ID node=$(hostname -s)"
          - agent: reviewer
            messages: ["review {{ .n }}"]
      - task: after
        run: echo after
mock:
  reviewer:
    - usage: { prompt_tokens: 100, completion_tokens: 5 }
      say: looks fine
)yaml");
  const auto r = RunSteps(dir_.path(), "run p.yaml --mock --plain --no-cache");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Each cell ran in its own job, on the node, and its output came back.
  std::set<std::string> jobs;
  static const std::regex kLine("cell ([a-d]) job=([0-9]+) node=(\\S+)");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), kLine), end;
       it != end; ++it) {
    jobs.insert((*it)[2]);
    EXPECT_EQ((*it)[3], TestSlurmCluster().node);
  }
  EXPECT_EQ(jobs.size(), 4u) << r.out;
  // The records: every attempt of a cell's steps names its cell's job
  // (the task's and the agent's alike), and the agents' turns are there.
  const std::vector<std::string> recorded = RecordedJobs(dir_.path());
  EXPECT_EQ(recorded.size(), 8u);
  EXPECT_EQ(std::set<std::string>(recorded.begin(), recorded.end()), jobs);
  const std::string show = RunSteps(dir_.path(), "show").out;
  EXPECT_THAT(show, HasSubstr("(slurm job "));
  EXPECT_THAT(show, HasSubstr("Spent: 420 tokens"));
  size_t turns = 0;
  for (size_t at = show.find("Agent: 1 turn"); at != std::string::npos;
       at = show.find("Agent: 1 turn", at + 1))
    ++turns;
  EXPECT_EQ(turns, 4u) << show;
  EXPECT_THAT(r.out, HasSubstr("after | after"));
}

// The across block's budget decides admission from what the cells on the
// nodes spent, as it does here: one cell at a time, 105 tokens each, a
// budget of 150: the third cell is not admitted.
TEST_F(SlurmCliTest, AnAcrossBudgetCountsWhatCellsSpentOnTheNodes) {
  Write("p.yaml", R"yaml(
agents:
  - name: reviewer
    source: { model: mock/reviewer }
jobs:
  - name: cells
    plan:
      - across:
          - { var: n, values: [a, b, c], max_in_flight: 1 }
        runner: slurm
        budget: { tokens: 150 }
        do:
          - agent: reviewer
            messages: ["review {{ .n }}"]
mock:
  reviewer:
    - usage: { prompt_tokens: 100, completion_tokens: 5 }
      say: fine
)yaml");
  const auto r = RunSteps(dir_.path(), "run p.yaml --mock --plain --no-cache");
  // A spent across budget degrades, as here: the job still succeeds.
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("[n=c] not started: across budget spent"));
  EXPECT_EQ(RecordedJobs(dir_.path()).size(), 2u);
}

// The job's budget holds across cells running at once on nodes: cell a
// spends it; cell b, waiting on its node until this run has said so (the
// budget marker on the shared state folder), sends no request and fails
// naming the job's budget.
TEST_F(SlurmCliTest, AJobBudgetSpentByOneCellStopsTheOthersOnTheirNodes) {
  const std::string run_id = "20261207-140000-0b0b";
  const std::string marker =
      dir_.path() + "/.steps/slurm/budget-" + run_id + "-" +
      CommandOutput("printf %s cells | sha256sum | cut -c1-16");
  Write("p.yaml", R"yaml(
agents:
  - name: spender
    source: { model: mock/spender }
jobs:
  - name: cells
    budget: { tokens: 150 }
    plan:
      - across:
          - { var: n, values: [a, b], max_in_flight: 2 }
        runner: slurm
        do:
          - task: wait
            run: |
              if [ "$n" = b ]; then
                for i in $(seq 600); do [ -e "$MARKER" ] && exit 0; sleep 0.1; done
                echo "no marker"; exit 1
              fi
            env: { MARKER: ")yaml" +
                      marker + R"yaml(" }
          - agent: spender
            messages: ["spend {{ .n }}"]
mock:
  spender:
    - usage: { prompt_tokens: 190, completion_tokens: 10 }
      say: spent
)yaml");
  const auto r = RunSteps(
      dir_.path(), "run p.yaml --mock --plain --no-cache --run-id " + run_id);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("no marker")));
  const std::string json = RunSteps(dir_.path(), "show --json").out;
  // Cell a passed the budget by itself; cell b never asked.
  EXPECT_THAT(json, HasSubstr("job budget: token budget of 150 exceeded (200 "
                              "used)"));
  EXPECT_THAT(json, HasSubstr("job budget: token budget of 150 spent (200 "
                              "used), counting the job's cells on other "
                              "nodes; another request would exceed it"));
  EXPECT_THAT(RunSteps(dir_.path(), "show").out,
              HasSubstr("Spent: 200 tokens"));
  // The marker goes with the run.
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// An abort reaches steps on the node: the cell's task is ended, its
// on_abort hook runs there, and no job is left.
TEST_F(SlurmCliTest, AnAbortEndsTheCellsOnTheNodes) {
  Write("p.yaml", R"yaml(
jobs:
  - name: cells
    plan:
      - across:
          - { var: n, values: [a, b] }
        runner: slurm
        do:
          - task: long
            run: echo "up $n"; sleep 300
            on_abort:
              task: note
              run: touch DIR/aborted-$n
)yaml");
  std::string yaml = ReadAll(dir_.path() + "/p.yaml");
  yaml.replace(yaml.find("DIR"), 3, dir_.path());
  Write("p.yaml", yaml);
  const std::string log = dir_.path() + "/log";
  pid_t pid =
      SpawnSteps(dir_.path(), {"run", "p.yaml", "--plain", "--no-cache"}, log);
  ASSERT_GT(pid, 0);
  // Both cells up (bound 60 s).
  const bool up = WaitForText(log, "| up ", 60000ms, 2);
  kill(pid, SIGINT);
  const int code = WaitForExit(pid, 60000ms);
  if (pid > 0) kill(pid, SIGKILL);
  ASSERT_TRUE(up) << ReadAll(log);
  EXPECT_EQ(code, 130) << ReadAll(log);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/aborted-a"))
      << ReadAll(log);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/aborted-b"));
  const std::vector<std::string> jobs = RecordedJobs(dir_.path());
  EXPECT_GE(jobs.size(), 2u);
  EXPECT_EQ(StillQueued(jobs), "");
  const std::string show = RunSteps(dir_.path(), "show").out;
  EXPECT_THAT(show, HasSubstr("aborted"));
}

// `steps` killed with SIGKILL cannot cancel its jobs: its guardian does,
// and a later run of the same state folder would.
TEST_F(SlurmCliTest, ARunKilledOutrightLeavesNoJobRunning) {
  Write("p.yaml", R"(
defaults:
  runner: slurm
jobs:
  - name: killed
    plan:
      - task: long
        run: echo "job=$SLURM_JOB_ID"; sleep 300
)");
  const std::string log = dir_.path() + "/log";
  pid_t pid = SpawnWithPath(FakeSbatch(/*hold=*/false),
                            {"run", "p.yaml", "--plain", "--no-cache"}, log);
  ASSERT_GT(pid, 0);
  const bool up = WaitForText(log, "long | job=", 60000ms);
  kill(pid, SIGKILL);
  WaitForExit(pid, 10000ms);
  ASSERT_TRUE(up) << ReadAll(log);
  std::smatch m;
  const std::string out = ReadAll(log);
  ASSERT_TRUE(std::regex_search(out, m, std::regex("job=([0-9]+)"))) << out;
  // The guardian cancels it (bound: 30 s, for Slurm to let go of it).
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (StillQueued({m[1]}) != "" && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(200ms);
  EXPECT_EQ(StillQueued({m[1]}), "");
}

// Killed while sbatch had queued the job but not yet said its id: the job
// is found by the run's tag (its comment) and cancelled all the same.
TEST_F(SlurmCliTest, AJobQueuedAsTheRunDiedIsFoundByItsTag) {
  const std::string bin = FakeSbatch(/*hold=*/true);
  Write("p.yaml", R"(
defaults:
  runner: slurm
jobs:
  - name: slowsub
    plan:
      - task: long
        run: sleep 300
)");
  const std::string log = dir_.path() + "/log";
  pid_t pid =
      SpawnWithPath(bin, {"run", "p.yaml", "--plain", "--no-cache"}, log);
  ASSERT_GT(pid, 0);
  const bool queued = WaitForText(dir_.path() + "/submitted", "\n", 60000ms);
  kill(pid, SIGKILL);
  WaitForExit(pid, 10000ms);
  ASSERT_TRUE(queued) << ReadAll(log);
  std::string id = ReadAll(dir_.path() + "/submitted");
  id = id.substr(0, id.find_first_of(";\n"));
  ASSERT_FALSE(id.empty());
  // Bound: 30 s for the guardian's squeue and scancel and Slurm's end.
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (StillQueued({id}) != "" && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(200ms);
  EXPECT_EQ(StillQueued({id}), "");
  // The fake sbatch itself is left sleeping; end it.
  CommandOutput("pkill -f " + bin + "/sbatch");
}

// The node goes down under the first attempt of each step. Without
// retry_lost the step ends errored after it; with it, the next attempt runs
// once the node is back.
TEST_F(SlurmCliTest, ALostAttemptIsRetriedOnlyWhereDeclared) {
  const std::string node = TestSlurmCluster().node;
  auto run_with_node_failure = [&](const std::string& file) {
    const std::string log = dir_.path() + "/" + file + ".log";
    pid_t pid =
        SpawnSteps(dir_.path(), {"run", file, "--plain", "--no-cache"}, log);
    const bool up = WaitForText(log, "| up", 60000ms);
    if (up) {
      CommandOutput("scontrol update nodename=" + node +
                    " state=down reason=steps-test");
    }
    // ReturnToService brings it back by itself; resume it in any case.
    std::this_thread::sleep_for(1s);
    CommandOutput("scontrol update nodename=" + node +
                  " state=resume 2>/dev/null");
    const int code = WaitForExit(pid, 120000ms);
    if (pid > 0) kill(pid, SIGKILL);
    EXPECT_TRUE(up) << ReadAll(log);
    return std::make_pair(code, ReadAll(log));
  };
  Write("plain.yaml", R"(
jobs:
  - name: lost
    runner: slurm
    plan:
      - task: work
        attempts: 2
        run: echo up; sleep 300
)");
  auto [code, out] = run_with_node_failure("plain.yaml");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("failed (NODE_FAIL)")) << out;
  EXPECT_THAT(out, Not(HasSubstr("attempt 2"))) << out;

  Write("retried.yaml", R"(
jobs:
  - name: lost
    runner: slurm
    slurm: {retry_lost: true}
    plan:
      - task: work
        attempts: 2
        run: |
          if [ "$STEPS_ATTEMPT" = 1 ]; then echo up; sleep 300; fi
          echo second attempt
)");
  auto [code2, out2] = run_with_node_failure("retried.yaml");
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_THAT(out2, HasSubstr("work | second attempt"));
}

TEST_F(SlurmCliTest, AnAcrossOf50CellsHonoursMaxInFlight) {
  // Each cell notes its start and end; at most 4 may overlap, though the
  // node has room for 8.
  std::string values;
  for (int i = 0; i < 50; ++i) values += (i ? "," : "") + std::to_string(i);
  const std::string times_file = dir_.path() + "/times";
  Write("p.yaml", R"Y(
defaults:
  runner: slurm
jobs:
  - name: fan
    plan:
      - across:
          - var: cell
            values: [)Y" +
                      values + R"Y(]
            max_in_flight: 4
        do:
          - task: work
            run: |
              echo "start $(date +%s.%N)" >> )Y" +
                      times_file + R"Y(
              sleep 1
              echo "end $(date +%s.%N)" >> )Y" +
                      times_file + R"Y(
)Y");
  test_support::CliResult r =
      RunSteps(dir_.path(), "run p.yaml --plain --no-cache");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::pair<double, int>> events;
  std::istringstream times(ReadAll(dir_.path() + "/times"));
  std::string what;
  double at;
  while (times >> what >> at) events.emplace_back(at, what == "start" ? 1 : -1);
  ASSERT_EQ(events.size(), 100u);
  std::sort(events.begin(), events.end());
  int now = 0, most = 0;
  for (const auto& [t, d] : events) most = std::max(most, now += d);
  EXPECT_LE(most, 4);
  EXPECT_GE(most, 2);  // They did run side by side.
  const std::vector<std::string> jobs = RecordedJobs(dir_.path());
  EXPECT_EQ(std::set<std::string>(jobs.begin(), jobs.end()).size(), 50u);
}

// The state folder on a tmpfs only this run's mount namespace sees: the
// node cannot see it, and the probe says so before any step runs there.
TEST_F(SlurmCliTest, AStateFolderTheNodesCannotSeeIsRefusedClearly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace";
  Write("p.yaml", R"(
jobs:
  - name: j
    plan:
      - task: here
        run: echo local
      - task: there
        runner: slurm
        run: echo never
)");
  const std::string hidden = dir_.path() + "/hidden";
  std::filesystem::create_directory(hidden);
  test_support::CliResult r = test_support::RunInShell(
      dir_.path(),
      "unshare --mount --propagation private bash -c 'mount -t tmpfs tmpfs " +
          hidden +
          " && \"$STEPS\" run p.yaml --plain --no-cache "
          "--state-dir " +
          hidden + "/state'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("here | local"));
  EXPECT_THAT(
      r.out, HasSubstr("the Slurm nodes cannot see " + hidden + "/state/slurm"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("a filesystem the nodes share"));
  EXPECT_THAT(r.out, Not(HasSubstr("never")));
}

TEST_F(SlurmCliTest, RunnerOnTheCommandLineWinsOverTheFile) {
  Write("p.yaml", R"(
defaults:
  runner: slurm
jobs:
  - name: here
    plan:
      - task: where
        run: echo "job=${SLURM_JOB_ID:-none}"
)");
  test_support::CliResult r =
      RunSteps(dir_.path(), "run p.yaml --plain --no-cache --runner local");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("where | job=none"));
  EXPECT_THAT(RunSteps(dir_.path(), "explain p.yaml --runner local").out,
              HasSubstr("runner             local         command line"));
}

}  // namespace
}  // namespace steps
