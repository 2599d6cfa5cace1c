// `runner:` and `slurm:`: how they load, resolve and reach the launcher.
// The Slurm launcher here is a scripted stand-in that answers as Slurm's
// would (the real one is tested against a real cluster in tests/slurm).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <mutex>

#include "executor_test_util.h"
#include "pipeline/explain.h"
#include "pipeline/resolve.h"
#include "test_util.h"

namespace steps::pipeline {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Answers each Run with the next scripted result and keeps the requests.
class ScriptedClusterLauncher : public ProcessLauncher {
 public:
  ProcessResult Run(const ProcessRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests.push_back(request);
    ProcessResult r;
    if (!results.empty()) {
      r = results.front();
      results.pop_front();
    }
    return r;
  }
  std::deque<ProcessResult> results;
  std::vector<ProcessRequest> requests;

 private:
  std::mutex mu_;
};

ProcessResult Lost() {
  ProcessResult r;
  r.end = ProcessEnd::kLost;
  r.error = "Slurm job 7: its node n1 failed (NODE_FAIL)";
  r.cluster = ClusterRun{"7", "n1", Millis(300), "NODE_FAIL", false, false};
  return r;
}

ProcessResult Exited(int code) {
  ProcessResult r;
  r.end = ProcessEnd::kExited;
  r.exit_code = code;
  r.cluster = ClusterRun{"8", "n1", Millis(100), "COMPLETED", false, false};
  return r;
}

ResolvedDials TaskDials(const std::string& text, PlanOptions options = {},
                        size_t step = 0) {
  auto p = MustLoad(text);
  if (!p) return {};
  ResolvedPlan plan(p, options);
  return plan.For(*p->jobs[0].plan[step]).dials;
}

constexpr const char* kLayered = R"(defaults:
  runner: slurm
  slurm: { partition: batch, account: lab, cpus: 2 }
jobs:
- name: j
  runner: local
  slurm: { account: team, mem: 4G }
  plan:
  - task: a
    run: "true"
  - task: b
    runner: slurm
    slurm: { cpus: 8, extra: ["--constraint=avx2"], retry_lost: true }
    run: "true"
)";

TEST(RunnerTest, TheStepThenTheJobThenDefaultsThenLocal) {
  ResolvedDials a = TaskDials(kLayered, {}, 0);
  EXPECT_EQ(a.runner.value, RunnerKind::kLocal);
  EXPECT_EQ(a.runner.origin, DialOrigin::kJob);
  EXPECT_EQ(a.runner.line, 6);
  ResolvedDials b = TaskDials(kLayered, {}, 1);
  EXPECT_EQ(b.runner.value, RunnerKind::kSlurm);
  EXPECT_EQ(b.runner.origin, DialOrigin::kStep);
  // Each slurm key from the nearest that wrote it.
  EXPECT_EQ(b.slurm.partition, "batch");
  EXPECT_EQ(b.slurm.account, "team");
  EXPECT_EQ(b.slurm.mem, "4G");
  EXPECT_EQ(b.slurm.cpus, 8);
  EXPECT_EQ(b.slurm.extra, std::vector<std::string>{"--constraint=avx2"});
  EXPECT_TRUE(b.retry_lost.value);
  EXPECT_EQ(b.retry_lost.origin, DialOrigin::kStep);
  EXPECT_FALSE(b.timeout_includes_queue.value);
  EXPECT_EQ(b.timeout_includes_queue.origin, DialOrigin::kPackageDefault);
  // Nobody wrote one: local.
  ResolvedDials none = TaskDials(
      "jobs:\n- name: j\n  plan:\n  - task: a\n"
      "    run: \"true\"\n");
  EXPECT_EQ(none.runner.value, RunnerKind::kLocal);
  EXPECT_EQ(none.runner.origin, DialOrigin::kPackageDefault);
}

TEST(RunnerTest, TheCommandLineWinsOverEverything) {
  PlanOptions local;
  local.runner = RunnerKind::kLocal;
  ResolvedDials b = TaskDials(kLayered, local, 1);
  EXPECT_EQ(b.runner.value, RunnerKind::kLocal);
  EXPECT_EQ(b.runner.origin, DialOrigin::kCommandLine);
  PlanOptions slurm;
  slurm.runner = RunnerKind::kSlurm;
  EXPECT_EQ(TaskDials(kLayered, slurm, 0).runner.value, RunnerKind::kSlurm);
}

TEST(RunnerTest, BadValuesAreRefusedWithTheirLine) {
  struct Case {
    std::string step_keys;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"runner: cluster", "'runner' must be local or slurm, not 'cluster'"},
      {"slurm: [a]", "'slurm' must be a mapping of partition"},
      {"slurm: { cpus: 0 }", "'slurm.cpus' must be a whole number from 1"},
      {"slurm: { cpus: -1 }", "'slurm.cpus' must be a whole number from 1"},
      {"slurm: { cpus: 100001 }", "'slurm.cpus' must be a whole number"},
      {"slurm: { mem: lots }", "'slurm.mem' must be a size"},
      {"slurm: { mem: 4GB }", "'slurm.mem' must be a size"},
      {"slurm: { partition: 'a b' }", "'slurm.partition' must be a partition"},
      {"slurm: { partition: '' }", "'slurm.partition' must be a partition"},
      {"slurm: { extra: ['--time=5'] }", "may not set --time"},
      {"slurm: { extra: ['-t5'] }", "holds sbatch's long options"},
      {"slurm: { extra: ['-vW'] }", "holds sbatch's long options"},
      {"slurm: { extra: ['--'] }", "holds sbatch's long options"},
      {"slurm: { extra: ['--wra=echo'] }", "may not set --wrap"},
      {"slurm: { extra: ['--arr=1-3'] }", "may not set --array"},
      {"slurm: { extra: ['--requ'] }", "may not set --requeue"},
      {"slurm: { extra: ['--export=NONE'] }", "may not set --export"},
      {"slurm: { extra: ['--output=x'] }", "may not set --output"},
      {"slurm: { extra: ['--requeue'] }", "use 'retry_lost: true'"},
      {"slurm: { extra: ['constraint'] }", "holds sbatch's long options"},
      {"slurm: { retry_lost: maybe }", "slurm.retry_lost"},
      {"slurm: { nodes: 2 }", "unknown key 'nodes'"},
      {"slurm: { extra: [\"--comment=a\\0b\"] }",
       "an option with a control byte ('--comment=a\\x00b')"},
      {"slurm: { extra: [\"--comment=\\e[31m\"] }",
       "('--comment=\\x1b[31m'): sbatch's options are text"},
      {"slurm: { account: \"a\\tb\" }", "not 'a\\x09b'"},
      {"slurm: { extra: [\"--comment=\\u009b1m\"] }",
       "('--comment=\\u009b1m'): sbatch's options are text"},
  };
  for (const Case& c : cases) {
    const std::string text =
        "jobs:\n- name: j\n  plan:\n  - task: a\n"
        "    run: \"true\"\n    " +
        c.step_keys + "\n";
    LoadResult r = LoadPipelineText(text, "t.yaml");
    const Diagnostic* d = Find(r.diagnostics, c.message);
    ASSERT_NE(d, nullptr) << c.step_keys << "\n" << r.diagnostics.FormatAll();
    EXPECT_EQ(d->line, 6) << c.step_keys;
  }
}

TEST(RunnerTest, OnlyTasksGetsPutsAndAcrossBlocksTakeARunner) {
  const std::string agent =
      "agents:\n- name: a\n  source: { model: mock/a }\njobs:\n- name: j\n"
      "  plan:\n  - agent: a\n    messages: [x]\n    runner: slurm\n";
  LoadResult r = LoadPipelineText(agent, "t.yaml");
  EXPECT_FALSE(r.pipeline);
  EXPECT_NE(Find(r.diagnostics, "an agent step runs where steps runs"), nullptr)
      << r.diagnostics.FormatAll();
  const std::string block =
      "jobs:\n- name: j\n  plan:\n  - do:\n    - task: a\n      run: \"true\"\n"
      "    slurm: { cpus: 2 }\n";
  r = LoadPipelineText(block, "t.yaml");
  EXPECT_FALSE(r.pipeline);
  EXPECT_NE(Find(r.diagnostics,
                 "'slurm' applies to task, get and put steps and to "
                 "across blocks, not to this block"),
            nullptr)
      << r.diagnostics.FormatAll();
}

constexpr const char* kLostTwice = R"(jobs:
- name: j
  runner: slurm
  plan:
  - task: work
    attempts: 3
    timeout: 10s
    run: "true"
)";

TEST(RunnerTest, ALostAttemptEndsTheStepErroredUnlessDeclared) {
  PipelineRun run(kLostTwice);
  ScriptedClusterLauncher slurm;
  slurm.results = {Lost(), Exited(0)};
  run.options.slurm = &slurm;
  JobRecord job = run.RunJob();
  ASSERT_EQ(run.observer().steps.size(), 1u);
  const StepRecord& step = run.observer().steps[0];
  EXPECT_EQ(step.outcome, Outcome::kErrored);
  EXPECT_THAT(step.error, HasSubstr("NODE_FAIL"));
  ASSERT_EQ(step.attempts.size(), 1u);
  EXPECT_TRUE(step.attempts[0].lost);
  ASSERT_TRUE(step.attempts[0].slurm);
  EXPECT_EQ(step.attempts[0].slurm->node, "n1");
  EXPECT_EQ(step.attempts[0].slurm->queued, Millis(300));
  EXPECT_EQ(slurm.requests.size(), 1u);
}

TEST(RunnerTest, ALostAttemptIsRetriedWhenDeclared) {
  std::string text = kLostTwice;
  text.replace(text.find("  runner: slurm\n"), 16,
               "  runner: slurm\n  slurm: { retry_lost: true }\n");
  PipelineRun run(text);
  ScriptedClusterLauncher slurm;
  slurm.results = {Lost(), Lost(), Exited(0)};
  run.options.slurm = &slurm;
  run.RunJob();
  const StepRecord& step = run.observer().steps.at(0);
  EXPECT_EQ(step.outcome, Outcome::kSucceeded);
  EXPECT_EQ(step.attempts.size(), 3u);
  EXPECT_EQ(slurm.requests.size(), 3u);
}

TEST(RunnerTest, QueueTimeIsOutsideTheTimeoutUnlessTheStepSaysSo) {
  const std::string text = R"(jobs:
- name: j
  runner: slurm
  plan:
  - task: apart
    timeout: 10s
    run: "true"
  - task: counted
    timeout: 10s
    slurm: { timeout_includes_queue: true, partition: p }
    run: "true"
  - task: unbounded
    run: "true"
)";
  PipelineRun run(text);
  ScriptedClusterLauncher slurm;
  slurm.results = {Exited(0), Exited(0), Exited(0)};
  run.options.slurm = &slurm;
  run.RunJob();
  ASSERT_EQ(slurm.requests.size(), 3u);
  const ProcessRequest& apart = slurm.requests[0];
  ASSERT_TRUE(apart.cluster);
  EXPECT_FALSE(apart.deadline.is_set());
  ASSERT_TRUE(apart.cluster->run_timeout);
  // What is left of 10 s when the job is submitted (generous: the
  // workspace work before it takes milliseconds).
  EXPECT_LE(*apart.cluster->run_timeout, 10s);
  EXPECT_GT(*apart.cluster->run_timeout, 9s);
  EXPECT_EQ(apart.cluster->job_name, "steps:j:1");
  const ProcessRequest& counted = slurm.requests[1];
  ASSERT_TRUE(counted.cluster);
  EXPECT_TRUE(counted.deadline.is_set());
  EXPECT_FALSE(counted.cluster->run_timeout);
  EXPECT_EQ(counted.cluster->partition, "p");
  const ProcessRequest& unbounded = slurm.requests[2];
  ASSERT_TRUE(unbounded.cluster);
  EXPECT_FALSE(unbounded.deadline.is_set());
  EXPECT_FALSE(unbounded.cluster->run_timeout);
}

// explain's placement reads as sbatch options a shell would take: one
// with a character the shell treats specially is quoted.
TEST(RunnerTest, ExplainQuotesAPlacementOptionAShellWouldSplit) {
  auto p = MustLoad(R"(jobs:
- name: j
  runner: slurm
  plan:
  - task: t
    slurm: { partition: debug, extra: ["--constraint=avx2|gpu", "--exclusive"] }
    run: "true"
)");
  ASSERT_TRUE(p);
  ResolvedPlan plan(p, {});
  EXPECT_THAT(Explain(plan, {}),
              HasSubstr("--partition=debug '--constraint=avx2|gpu' "
                        "--exclusive"));
}

TEST(RunnerTest, WithoutASlurmRunnerASlurmStepErrors) {
  PipelineRun run(kLostTwice);
  run.RunJob();
  const StepRecord& step = run.observer().steps.at(0);
  EXPECT_EQ(step.outcome, Outcome::kErrored);
  EXPECT_THAT(step.error, HasSubstr("this run has no Slurm runner"));
}

TEST(RunnerTest, SlurmsTimeLimitReadsAsSlurms) {
  PipelineRun run(kLostTwice);
  ScriptedClusterLauncher slurm;
  ProcessResult limit;
  limit.end = ProcessEnd::kTimedOut;
  limit.cluster = ClusterRun{"9", "n1", Millis(0), "TIMEOUT", true, false};
  slurm.results = {limit};
  run.options.slurm = &slurm;
  run.RunJob();
  const StepRecord& step = run.observer().steps.at(0);
  EXPECT_EQ(step.outcome, Outcome::kFailed);
  ASSERT_EQ(step.attempts.size(), 1u);
  EXPECT_TRUE(step.attempts[0].timed_out);
  EXPECT_EQ(step.attempts[0].error, "timed out (Slurm's time limit)");
}

// Stands in for a Slurm launcher whose first job waits in the queue until
// its time to start passes (the clock is moved there), as the real one
// answers then; later jobs run and exit 0.
class QueuedPastStartBy : public ProcessLauncher {
 public:
  explicit QueuedPastStartBy(FakeClock& clock, size_t failing_first = 0)
      : clock_(clock), failing_first_(failing_first) {}
  ProcessResult Run(const ProcessRequest& request) override {
    requests.push_back(request);
    if (requests.size() <= failing_first_) return Exited(1);
    if (requests.size() > failing_first_ + 1) return Exited(0);
    ProcessResult r;
    r.end = ProcessEnd::kFailedToStart;
    r.cluster = ClusterRun{"11", "", Millis(0), "PENDING", false, true};
    r.error =
        "Slurm job 11 was still in Slurm's queue when its time to "
        "start on a node passed; it was cancelled";
    if (request.cluster && request.cluster->start_by.is_set()) {
      clock_.Advance(std::chrono::duration_cast<Millis>(
                         request.cluster->start_by.at() - clock_.Now()) +
                     1ms);
      r.cluster->queued = Millis(3'600'000);
    }
    return r;
  }
  std::vector<ProcessRequest> requests;

 private:
  FakeClock& clock_;
  const size_t failing_first_;
};

TEST(RunnerTest, AJobStillQueuedAtTheJobsDeadlineNeverStarts) {
  const std::string text = R"(jobs:
- name: j
  timeout: 1h
  runner: slurm
  plan:
  - task: queued
    attempts: 3
    timeout: 10s
    run: "true"
  - task: after
    run: "true"
  on_failure:
    task: tell
    run: "true"
)";
  FakeClock clock(/*auto_advance=*/true);
  PipelineRun run(text, &clock);
  QueuedPastStartBy slurm(clock);
  run.options.slurm = &slurm;
  const SteadyTime start = clock.Now();
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  ASSERT_EQ(slurm.requests.size(), 2u);
  // The job's deadline, queue included, is the first job's time to start;
  // the hook runs past the job's deadline, so its job has none.
  ASSERT_TRUE(slurm.requests[0].cluster);
  ASSERT_TRUE(slurm.requests[0].cluster->start_by.is_set());
  EXPECT_EQ(slurm.requests[0].cluster->start_by.at(), start + 1h);
  ASSERT_TRUE(slurm.requests[1].cluster);
  EXPECT_FALSE(slurm.requests[1].cluster->start_by.is_set());
  // 'after' never ran: the job failed at 'queued'.
  const std::vector<StepRecord>& steps = job.steps;
  ASSERT_EQ(steps.size(), 2u);
  const StepRecord& queued = steps[0];
  EXPECT_EQ(queued.outcome, Outcome::kFailed);
  // No further attempt: the job's deadline has passed.
  ASSERT_EQ(queued.attempts.size(), 1u);
  EXPECT_EQ(queued.attempts[0].exhausted_by, "job_timeout");
  EXPECT_FALSE(queued.attempts[0].timed_out);
  EXPECT_THAT(queued.error,
              HasSubstr("job 'j' passed its timeout of 1h while this "
                        "attempt's Slurm job was queued (Slurm job 11 was "
                        "still in Slurm's queue"));
  ASSERT_TRUE(queued.attempts[0].slurm);
  EXPECT_EQ(queued.attempts[0].slurm->job_id, "11");
  EXPECT_EQ(steps[1].ref.name, "tell");
  EXPECT_EQ(steps[1].outcome, Outcome::kSucceeded);
  EXPECT_THAT(job.error, HasSubstr("passed its timeout of 1h"));
}

// Two attempts failed, the third waited in the queue past the job's
// deadline: the job's deadline ended the retries, and the step says so,
// not that its attempts ran out (3 of 6 were tried).
TEST(RunnerTest, TheJobsDeadlineEndsTheRetriesInItsOwnWords) {
  const std::string text = R"(jobs:
- name: j
  timeout: 1h
  runner: slurm
  plan:
  - task: flaky
    attempts: 6
    run: "true"
)";
  FakeClock clock(/*auto_advance=*/true);
  PipelineRun run(text, &clock);
  QueuedPastStartBy slurm(clock, /*failing_first=*/2);
  run.options.slurm = &slurm;
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_EQ(slurm.requests.size(), 3u);
  const StepRecord& step = job.steps.at(0);
  EXPECT_EQ(step.outcome, Outcome::kFailed);
  ASSERT_EQ(step.attempts.size(), 3u);
  EXPECT_EQ(step.attempts[2].exhausted_by, "job_timeout");
  EXPECT_THAT(step.error, ::testing::StartsWith(
                              "job 'j' passed its timeout of 1h while this "
                              "attempt's Slurm job was queued"));
  EXPECT_THAT(step.error, ::testing::Not(HasSubstr("STEP_RETRY_EXHAUSTED")));
}

// A Slurm step's retry wait that would end at or past the job's deadline
// is not waited out: the next attempt's job could not leave the queue. One
// a millisecond shorter is waited, and the attempt runs.
TEST(RunnerTest, ARetryWaitPastTheJobsDeadlineIsNotWaitedOut) {
  for (const int delay : {4000, 3999}) {
    const std::string text = R"(jobs:
- name: j
  timeout: 4s
  runner: slurm
  plan:
  - task: t
    attempts: 3
    retry: { base_delay_ms: )" +
                             std::to_string(delay) +
                             R"( }
    run: exit 1
)";
    FakeClock clock(/*auto_advance=*/true);
    PipelineRun run(text, &clock);
    ScriptedClusterLauncher slurm;
    slurm.results = {Exited(1), Exited(0)};
    run.options.slurm = &slurm;
    const SteadyTime start = clock.Now();
    JobRecord job = run.RunJob();
    const StepRecord& step = job.steps.at(0);
    if (delay == 4000) {
      EXPECT_EQ(slurm.requests.size(), 1u);
      EXPECT_LT(clock.Now() - start, 4s);
      EXPECT_EQ(step.outcome, Outcome::kFailed);
      EXPECT_EQ(step.error,
                "attempt 2 of 3 was not started: its retry wait of 4s would "
                "end at or after job 'j''s timeout of 4s, when its Slurm job "
                "could no longer leave the queue");
      ASSERT_EQ(step.attempts.size(), 1u);
      EXPECT_EQ(step.attempts[0].exhausted_by, "job_timeout");
      EXPECT_EQ(job.outcome, Outcome::kFailed);
    } else {
      EXPECT_EQ(slurm.requests.size(), 2u);
      EXPECT_EQ(step.outcome, Outcome::kSucceeded);
    }
  }
}

// Slurm holds the job for a reason that never passes: another attempt
// would be held the same way, so there is none.
TEST(RunnerTest, AJobSlurmCannotRunIsNotRetried) {
  const std::string text = R"(jobs:
- name: j
  runner: slurm
  plan:
  - task: never
    attempts: 3
    run: "true"
)";
  PipelineRun run(text);
  ScriptedClusterLauncher slurm;
  ProcessResult held;
  held.end = ProcessEnd::kFailedToStart;
  held.error =
      "Slurm cannot run job 12 as asked: it is held pending with reason "
      "PartitionConfig (it asks more than the partition allows); it was "
      "cancelled";
  held.cluster = ClusterRun{"12", "", Millis(900), "CANCELLED", false, false};
  held.cluster->cannot_run = true;
  ProcessResult refused = held;
  refused.cluster->cannot_run = false;
  slurm.results = {held, Exited(0)};
  run.options.slurm = &slurm;
  run.RunJob();
  const StepRecord& step = run.observer().steps.at(0);
  EXPECT_EQ(step.outcome, Outcome::kErrored);
  EXPECT_EQ(step.attempts.size(), 1u);
  EXPECT_EQ(slurm.requests.size(), 1u);
  EXPECT_THAT(step.error, HasSubstr("reason PartitionConfig"));

  // Any other failure to start is retried as before.
  PipelineRun again(text);
  ScriptedClusterLauncher slurm2;
  slurm2.results = {refused, Exited(0)};
  again.options.slurm = &slurm2;
  again.RunJob();
  EXPECT_EQ(again.observer().steps.at(0).outcome, Outcome::kSucceeded);
  EXPECT_EQ(slurm2.requests.size(), 2u);
}

TEST(RunnerTest, AJobWithoutATimeoutGivesItsSlurmJobsNoTimeToStart) {
  PipelineRun run(kLostTwice);
  ScriptedClusterLauncher slurm;
  slurm.results = {Exited(0)};
  run.options.slurm = &slurm;
  run.RunJob();
  ASSERT_EQ(slurm.requests.size(), 1u);
  ASSERT_TRUE(slurm.requests[0].cluster);
  EXPECT_FALSE(slurm.requests[0].cluster->start_by.is_set());
}

}  // namespace
}  // namespace steps::pipeline
