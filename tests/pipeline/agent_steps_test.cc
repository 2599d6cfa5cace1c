// Agent steps through the executor, each source served by the in-process
// mock provider from the pipeline's own `mock:` block: a job budget shared
// by several agent steps, an across budget that stops admitting cells while
// the running ones finish, and `fix:` on a task with several attempts.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "agent/runner.h"
#include "common/log_capture.h"
#include "executor_test_util.h"
#include "mock_provider/script.h"

namespace steps::pipeline {
namespace {

using test_support::LogCapture;

// A PipelineRun whose agents are answered by its file's mock: block.
class MockedRun {
 public:
  explicit MockedRun(const std::string& yaml, Clock* clock = &RealClock())
      : run_(yaml, clock) {
    if (!run_.plan()) return;
    const auto& mock = run_.plan()->pipeline().mock;
    EXPECT_TRUE(mock.has_value()) << "the pipeline has no mock: block";
    if (!mock) return;
    Result<MockScript> script = ParseMockScript(*mock);
    EXPECT_TRUE(script.ok()) << script.status().message();
    if (!script.ok()) return;
    agent::AgentRunnerOptions options;
    options.retry.initial_backoff = Millis(1);  // Keep request retries fast.
    options.retry.jitter = [] { return 1.0; };
    agents_ = agent::MakeMockAgentRunner(std::move(*script), options);
    run_.options.agents = agents_.get();
  }

  JobRecord RunJob() { return run_.RunJob(); }
  RecordingObserver& observer() { return run_.observer(); }
  const std::string& state_dir() const { return run_.state_dir(); }

  // Requests the mock received for `agent`, in order.
  std::vector<MockRequestRecord> RequestsFor(const std::string& agent) const {
    std::vector<MockRequestRecord> out;
    for (const MockRequestRecord& r : agents_->MockRequests()) {
      if (r.agent == agent) out.push_back(r);
    }
    return out;
  }
  std::vector<std::string> MockFailures() const {
    return agents_->MockExpectationFailures();
  }
  // Records of every run of the fix agent `name`, in the order they ended.
  std::vector<StepRecord> FixerRuns(const std::string& name) {
    std::vector<StepRecord> out;
    for (const StepRecord& r : run_.observer().steps) {
      if (r.ref.fixer && r.ref.name == name) out.push_back(r);
    }
    return out;
  }
  // The records of steps named `name` that ran (or, with `not_started`,
  // of those kept from starting).
  std::vector<StepRecord> StepsNamed(const std::string& name,
                                     bool not_started = false) {
    std::vector<StepRecord> out;
    for (const StepRecord& r : run_.observer().steps) {
      if (!r.ref.fixer && r.ref.name == name &&
          (r.outcome == Outcome::kNotStarted) == not_started)
        out.push_back(r);
    }
    return out;
  }

 private:
  PipelineRun run_;
  std::unique_ptr<agent::ConversationRunner> agents_;
};

// Three agent steps in one job, each answered with 100 tokens, under a job
// budget of `tokens`.
std::string ThreeStepsUnderJobBudget(int tokens) {
  return R"(agents:
- name: writer
  source: { model: mock/writer }
jobs:
- name: j
  budget: { tokens: )" +
         std::to_string(tokens) + R"( }
  plan:
  - { agent: writer, name: one, messages: [first] }
  - { agent: writer, name: two, messages: [second] }
  - { agent: writer, name: three, messages: [third] }
mock:
  default:
    say: done
    usage: { prompt_tokens: 60, completion_tokens: 40 }
)";
}

TEST(AgentStepsTest, JobBudgetExactlySpentStopsTheNextStepBeforeItsRequest) {
  MockedRun run(ThreeStepsUnderJobBudget(200));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_EQ(job.execution, Names({"one", "two", "three"}));
  ASSERT_EQ(run.StepsNamed("two").size(), 1u);
  // Two steps spend the budget exactly: that is not exceeding it.
  EXPECT_EQ(run.StepsNamed("two")[0].outcome, Outcome::kSucceeded);
  ASSERT_EQ(run.StepsNamed("three").size(), 1u);
  const StepRecord three = run.StepsNamed("three")[0];
  EXPECT_EQ(three.outcome, Outcome::kFailed);
  EXPECT_EQ(three.error,
            "agent: job budget: token budget of 200 spent (200 used); "
            "another request would exceed it");
  ASSERT_TRUE(three.agent.has_value());
  EXPECT_EQ(three.agent->provider_requests, 0);
  // Only the first two steps reached the provider.
  EXPECT_EQ(run.RequestsFor("writer").size(), 2u);
}

TEST(AgentStepsTest, JobBudgetOneTokenAboveLetsTheThirdStepExceedIt) {
  MockedRun run(ThreeStepsUnderJobBudget(201));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  ASSERT_EQ(run.StepsNamed("three").size(), 1u);
  const StepRecord three = run.StepsNamed("three")[0];
  EXPECT_EQ(three.outcome, Outcome::kFailed);
  EXPECT_EQ(three.error,
            "agent: job budget: token budget of 201 exceeded (300 used)");
  ASSERT_TRUE(three.agent.has_value());
  EXPECT_EQ(three.agent->provider_requests, 1);
  EXPECT_EQ(three.agent->answer, "done");  // The last answer is kept.
  EXPECT_EQ(run.RequestsFor("writer").size(), 3u);
}

TEST(AgentStepsTest, JobBudgetLargeEnoughForEveryStep) {
  MockedRun run(ThreeStepsUnderJobBudget(301));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  EXPECT_EQ(run.RequestsFor("writer").size(), 3u);
}

TEST(AgentStepsTest, JobBudgetInUsdCountsTheCostEachProviderReports) {
  MockedRun run(R"(agents:
- name: cheap
  source: { model: mock/cheap }
- name: dear
  source: { model: mock/dear }
jobs:
- name: j
  budget: { usd: 0.05 }
  plan:
  - { agent: cheap, messages: [a] }
  - { agent: dear, messages: [b] }
mock:
  cheap:
  - say: ok
    usage: { prompt_tokens: 1, completion_tokens: 1, cost: 0.02 }
  dear:
  - say: ok
    usage: { prompt_tokens: 1, completion_tokens: 1, cost: 0.04 }
)");
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  ASSERT_EQ(run.StepsNamed("dear").size(), 1u);
  const std::string error = run.StepsNamed("dear")[0].error;
  EXPECT_EQ(error.rfind("agent: job budget: USD budget of $0.05 exceeded", 0),
            0u)
      << error;
  EXPECT_EQ(run.StepsNamed("cheap")[0].outcome, Outcome::kSucceeded);
}

TEST(AgentStepsTest, JobBudgetIsChargedByFixers) {
  // The fixer's conversation counts toward the job budget too: after it,
  // the agent step that follows finds the budget spent.
  MockedRun run(R"(agents:
- name: fixer
  source: { model: mock/fixer }
  tools: [write_file]
- name: writer
  source: { model: mock/writer }
jobs:
- name: j
  budget: { tokens: 100 }
  plan:
  - task: check
    run: test -f patched.txt
    fix: fixer
  - { agent: writer, messages: [go] }
mock:
  fixer:
  - call: { name: write_file, arguments: { path: patched.txt, content: x } }
    usage: { prompt_tokens: 30, completion_tokens: 20 }
  - say: patched
    usage: { prompt_tokens: 30, completion_tokens: 20 }
  writer:
    say: never sent
)");
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.execution, Names({"fixer", "check", "writer"}));
  ASSERT_EQ(run.StepsNamed("check").size(), 1u);
  EXPECT_EQ(run.StepsNamed("check")[0].outcome, Outcome::kSucceeded);
  ASSERT_EQ(run.StepsNamed("writer").size(), 1u);
  EXPECT_EQ(run.StepsNamed("writer")[0].error,
            "agent: job budget: token budget of 100 spent (100 used); "
            "another request would exceed it");
  EXPECT_TRUE(run.RequestsFor("writer").empty());
}

// An across block over six cells, one at a time, whose agent step answers
// with 100 tokens, under an across budget of `tokens`.
std::string SequentialAcross(int tokens) {
  return R"(agents:
- name: writer
  source: { model: mock/writer }
jobs:
- name: j
  plan:
  - across:
    - { var: n, values: [a, b, c, d, e, f], max_in_flight: 1 }
    budget: { tokens: )" +
         std::to_string(tokens) + R"( }
    do:
    - { agent: writer, name: cell, messages: ["cell {{ .n }}"] }
mock:
  default:
    say: done
    usage: { prompt_tokens: 60, completion_tokens: 40 }
)";
}

TEST(AgentStepsTest, AcrossBudgetExactlySpentAdmitsNoFurtherCell) {
  LogCapture logs;
  MockedRun run(SequentialAcross(200));
  JobRecord job = run.RunJob();
  // Degrades: the block and the job succeed with the cells that ran.
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  EXPECT_EQ(run.StepsNamed("cell").size(), 2u);
  EXPECT_EQ(run.RequestsFor("writer").size(), 2u);
  // Each cell not admitted has a record that says why.
  std::vector<StepRecord> unstarted = run.StepsNamed("cell", true);
  ASSERT_EQ(unstarted.size(), 4u);
  EXPECT_EQ(unstarted[0].error,
            "across budget spent: token budget of 200 spent (200 used)");
  // Named by its cell's values, which tell the four apart.
  std::set<std::string> cells;
  for (const StepRecord& s : unstarted) cells.insert(s.ref.cell);
  EXPECT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells.count(""), 0u);
  std::vector<std::string> spent = logs.LinesWith("across.budget_spent");
  ASSERT_EQ(spent.size(), 1u);
  const std::string* line = &spent[0];
  EXPECT_NE(line->find("job=j"), std::string::npos) << *line;
  EXPECT_NE(line->find("admitted=2 not_admitted=4"), std::string::npos)
      << *line;
  EXPECT_NE(line->find("token budget of 200 spent (200 used)"),
            std::string::npos)
      << *line;
}

TEST(AgentStepsTest, AcrossCellAdmittedBeforeTheBudgetIsSpentRunsToTheEnd) {
  // 201: after two cells one token is left, so the third cell is admitted;
  // its conversation goes past the across budget and still succeeds (an
  // across budget decides admission, it does not cut a cell short).
  MockedRun run(SequentialAcross(201));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  std::vector<StepRecord> cells = run.StepsNamed("cell");
  ASSERT_EQ(cells.size(), 3u);
  for (const StepRecord& c : cells) {
    EXPECT_EQ(c.outcome, Outcome::kSucceeded) << c.error;
  }
}

TEST(AgentStepsTest, AcrossBudgetWithoutACapAdmitsEveryCell) {
  MockedRun run(SequentialAcross(0));  // 0: no cap on tokens.
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  EXPECT_EQ(run.StepsNamed("cell").size(), 6u);
}

TEST(AgentStepsTest, AcrossBudgetIsChargedByFixersInItsCells) {
  // Each cell's task fails and its fixer spends 100 tokens: after the first
  // cell the across budget is spent, so no other cell (and no other fixer)
  // runs.
  MockedRun run(R"(agents:
- name: fixer
  source: { model: mock/fixer }
jobs:
- name: j
  plan:
  - across:
    - { var: n, values: [a, b, c], max_in_flight: 1 }
    budget: { tokens: 100 }
    do:
    - { task: check, run: "false", fix: fixer }
mock:
  default:
    say: I could not fix it.
    usage: { prompt_tokens: 60, completion_tokens: 40 }
)");
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_EQ(run.FixerRuns("fixer").size(), 1u);
  EXPECT_EQ(run.StepsNamed("check").size(), 1u);
}

TEST(AgentStepsTest, AcrossBudgetSpentWhileCellsRunLetsThemFinish) {
  // Two cells run at once on a fake clock. One answers after 1s and spends
  // the whole budget; the other, still waiting for its answer, finishes at
  // 10s and succeeds; the remaining four cells are never admitted.
  FakeClock clock;
  MockedRun run(R"(agents:
- name: writer
  source: { model: mock/writer }
  timeout: "0"
jobs:
- name: j
  plan:
  - across:
    - { var: n, values: [a, b, c, d, e, f], max_in_flight: 2 }
    budget: { tokens: 100 }
    do:
    - { agent: writer, name: cell, messages: ["cell {{ .n }}"] }
mock:
  writer:
  - { say: quick, delay: 1s, usage: { prompt_tokens: 60, completion_tokens: 40 } }
  - { say: slow, delay: 10s, usage: { prompt_tokens: 60, completion_tokens: 40 } }
  - { say: never }
)",
                &clock);
  JobRecord job;
  std::thread runner([&] { job = run.RunJob(); });
  clock.WaitForSleepers(2);  // Both cells wait for their answers.
  clock.Advance(std::chrono::seconds(1));
  run.observer().WaitForStepEnds(1);  // The quick cell is done...
  EXPECT_EQ(clock.sleepers(), 1);     // ...while the slow one still waits.
  clock.Advance(std::chrono::seconds(9));
  runner.join();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  std::vector<StepRecord> cells = run.StepsNamed("cell");
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].output, "quick");
  EXPECT_EQ(cells[1].output, "slow");
  EXPECT_EQ(cells[1].outcome, Outcome::kSucceeded);
  EXPECT_EQ(run.RequestsFor("writer").size(), 2u);
}

// A task that fails until patched.txt exists, with `attempts` attempts and
// a fixer whose script is `fixer_script`.
std::string FixPipeline(int attempts, const std::string& fix,
                        const std::string& fixer_script) {
  return R"(agents:
- name: fixer
  source: { model: mock/fixer }
  tools: [write_file]
jobs:
- name: j
  plan:
  - task: check
    run: test -f patched.txt
    attempts: )" +
         std::to_string(attempts) + R"(
    fix: )" +
         fix +
         R"(
mock:
)" + fixer_script;
}

TEST(AgentStepsTest, FixerRunsOncePerFailedAttempt) {
  // The fixer never patches anything: each of the three attempts fails,
  // the fixer runs after each, and each re-run fails again.
  MockedRun run(
      FixPipeline(3, "fixer", "  default: { say: I could not find it. }\n"));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_EQ(job.execution, Names({"fixer", "fixer", "fixer", "check"}));
  EXPECT_EQ(run.FixerRuns("fixer").size(), 3u);
  ASSERT_EQ(run.StepsNamed("check").size(), 1u);
  const StepRecord check = run.StepsNamed("check")[0];
  ASSERT_EQ(check.attempts.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(check.attempts[k].number, static_cast<int>(k) + 1);
    EXPECT_EQ(check.attempts[k].of, 3);
    EXPECT_TRUE(check.attempts[k].fixed);
    EXPECT_EQ(check.attempts[k].outcome, Outcome::kFailed);
  }
  // Each fixer run is told about the failure it is to fix.
  std::vector<MockRequestRecord> requests = run.RequestsFor("fixer");
  ASSERT_EQ(requests.size(), 3u);
  for (const MockRequestRecord& r : requests) {
    EXPECT_NE(r.body.find("The task 'check' failed"), std::string::npos);
  }
}

TEST(AgentStepsTest, FixerThatPatchesOnItsSecondRunEndsTheRetries) {
  MockedRun run(FixPipeline(3, "fixer", R"(  fixer:
  - say: I could not find it.
  - call: { name: write_file, arguments: { path: patched.txt, content: x } }
  - expect: { tool_result: true }
    say: Created patched.txt.
)"));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  EXPECT_EQ(job.execution, Names({"fixer", "fixer", "check"}));
  const StepRecord check = run.StepsNamed("check")[0];
  ASSERT_EQ(check.attempts.size(), 2u);
  EXPECT_EQ(check.attempts[0].outcome, Outcome::kFailed);
  EXPECT_EQ(check.attempts[1].outcome, Outcome::kSucceeded);
  EXPECT_TRUE(check.attempts[1].fixed);
  EXPECT_TRUE(run.MockFailures().empty());
}

TEST(AgentStepsTest, FixerAttemptsAreItsOwnRequestRetries) {
  // fix: {agent, attempts: 2}: the fixer's request that hits a 500 is
  // retried once, inside the same conversation, and the fix lands.
  MockedRun run(FixPipeline(1, "{ agent: fixer, attempts: 2 }", R"(  fixer:
  - status: 500
  - call: { name: write_file, arguments: { path: patched.txt, content: x } }
  - say: Created patched.txt.
)"));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded) << job.error;
  std::vector<StepRecord> fixes = run.FixerRuns("fixer");
  ASSERT_EQ(fixes.size(), 1u);
  ASSERT_TRUE(fixes[0].agent.has_value());
  EXPECT_EQ(fixes[0].outcome, Outcome::kSucceeded);
  EXPECT_EQ(fixes[0].agent->provider_requests, 3);
  EXPECT_EQ(fixes[0].agent->turns, 2);
}

TEST(AgentStepsTest, FixerWithDefaultAttemptsGivesUpOnA500) {
  // Without `attempts` the fixer sends each request once: the 500 ends it
  // errored, the task re-runs unpatched and fails.
  MockedRun run(FixPipeline(1, "fixer", R"(  fixer:
  - status: 500
  - say: too late
)"));
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  std::vector<StepRecord> fixes = run.FixerRuns("fixer");
  ASSERT_EQ(fixes.size(), 1u);
  EXPECT_EQ(fixes[0].outcome, Outcome::kErrored);
  ASSERT_TRUE(fixes[0].agent.has_value());
  EXPECT_EQ(fixes[0].agent->provider_requests, 1);
  EXPECT_EQ(run.StepsNamed("check")[0].outcome, Outcome::kFailed);
}

TEST(AgentStepsTest, AnAgentStepsRetriesAndGivingUpAreLoggedAgainstIt) {
  MockedRun run(R"(agents:
- name: writer
  source: { model: mock/writer }
  attempts: 2
jobs:
- name: j
  plan:
  - { agent: writer, messages: [go] }
mock:
  writer:
  - status: 503
  - status: 500
)");
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  std::vector<std::string> logs = run.observer().logs["writer"];
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0],
            "WRN agent.request_retry agent=writer model=writer attempt=1 "
            "attempts=2 status=503");
  EXPECT_EQ(logs[1].rfind("WRN agent.conversation_failed agent=writer "
                          "provider_requests=2 error=",
                          0),
            0u)
      << logs[1];
}

}  // namespace
}  // namespace steps::pipeline
