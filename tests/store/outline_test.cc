// What the store keeps for the web UI's live page and timeline: the plan's
// outline from the run's start (with the ids the executor then gives its
// steps), when each agent turn answered and when a nudge was sent, and an
// older store gaining these columns.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "pipeline/executor.h"
#include "pipeline/loader.h"
#include "process/local_launcher.h"
#include "store/plan_outline.h"
#include "store/reader.h"
#include "store/recorder.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using store_testing::TempDir;

class InstantAgents : public agent::AgentRunner {
 public:
  agent::AgentResult Run(const agent::AgentInvocation&,
                         const agent::AgentContext&) override {
    agent::AgentResult r;
    r.outcome = Outcome::kSucceeded;
    r.answer = "done";
    r.turns = 1;
    return r;
  }
};

// Every shape that names steps: a sequence, a fan-out, a do, an across of
// two cells, a step's hooks and the job's own.
constexpr const char* kShapes = R"(
agents:
- name: helper
  source: { model: mock/x }
  timeout: 2m
jobs:
- name: build
  plan:
  - task: first
    run: "true"
    timeout: 30s
  - in_parallel:
    - agent: helper
      messages: ["hi"]
    - task: side
      run: "true"
      on_success:
        task: tell
        run: "true"
      on_failure:
        task: alert
        run: "true"
  - do:
    - task: inner
      run: "true"
  - across:
    - { var: v, values: [a, b] }
    do:
    - { task: cell, run: "true" }
  ensure:
    task: cleanup
    run: "true"
- name: other
  plan:
  - task: elsewhere
    run: "true"
)";

std::string Ids(const PlannedJob& job) {
  std::string out;
  for (const PlannedStep& s : job.steps) {
    out += s.id + (s.hook.empty() ? "" : "(" + s.hook + ")") + " ";
  }
  return out;
}

TEST(PlanOutlineTest, NamesTheStepsAsTheExecutorThenDoes) {
  TempDir state;
  auto opened = Store::Open(StorePath(state.path()));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  pipeline::LoadResult loaded = pipeline::LoadPipelineText(kShapes, "t.yaml");
  ASSERT_TRUE(loaded.pipeline) << loaded.diagnostics.FormatAll();
  pipeline::ResolvedPlan plan(loaded.pipeline);

  std::vector<PlannedJob> outline = OutlinePlan(plan, {"build"});
  ASSERT_EQ(outline.size(), 1u) << "only the jobs asked for";
  EXPECT_EQ(Ids(outline[0]),
            "build:1 build:2.1 build:2.2 build:2.2/on_success(on_success) "
            "build:2.2/on_failure(on_failure) build:3.1 build:4.c1.1 "
            "build:4.c2.1 build:job/ensure(ensure) ");
  EXPECT_EQ(outline[0].steps[0].timeout_ms, 30000);
  EXPECT_EQ(outline[0].steps[1].kind, "agent");
  EXPECT_EQ(outline[0].steps[1].timeout_ms, 120000);
  EXPECT_EQ(outline[0].steps[2].timeout_ms, std::nullopt);
  EXPECT_EQ(outline[0].steps[1].line, 13);
  EXPECT_EQ(OutlinePlan(plan, {}).size(), 2u) << "every job when none named";

  // Run it: the outline is there with the run's row, and every step that
  // ran carries an id the outline named.
  InstantAgents agents;
  LocalProcessLauncher launcher;
  pipeline::ExecutorOptions opts;
  opts.launcher = &launcher;
  opts.agents = &agents;
  opts.state_dir = state.path();
  opts.run_id = "20261130-070000-0001";
  RunRecorder recorder(**opened);
  recorder.SetPlan(outline);
  opts.observer = &recorder;
  pipeline::Executor(plan, opts).Run({"build"});

  Result<StoredRun> run = LoadRun(**opened, opts.run_id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->plan.size(), 1u);
  EXPECT_EQ(Ids(run->plan[0]), Ids(outline[0]));
  EXPECT_EQ(run->plan[0].steps[0].timeout_ms, 30000);
  std::set<std::string> planned;
  for (const PlannedStep& s : outline[0].steps) planned.insert(s.id);
  ASSERT_EQ(run->jobs.size(), 1u);
  EXPECT_EQ(run->jobs[0].steps.size(), 8u) << "on_failure did not run";
  for (const StoredStep& s : run->jobs[0].steps)
    EXPECT_TRUE(planned.count(s.id)) << s.id << " is not in the outline";
}

TEST(PlanOutlineTest, AWideAcrossIsCut) {
  std::string yaml =
      "jobs:\n- name: wide\n  plan:\n  - across:\n"
      "    - { var: a, values: [";
  for (int i = 0; i < 40; ++i) yaml += (i ? "," : "") + std::to_string(i);
  yaml += "] }\n    - { var: b, values: [";
  for (int i = 0; i < 40; ++i) yaml += (i ? "," : "") + std::to_string(i);
  yaml += "] }\n    do:\n    - { task: t, run: \"true\" }\n";
  pipeline::LoadResult loaded = pipeline::LoadPipelineText(yaml, "t.yaml");
  ASSERT_TRUE(loaded.pipeline) << loaded.diagnostics.FormatAll();
  pipeline::ResolvedPlan plan(loaded.pipeline);
  std::vector<PlannedJob> outline = OutlinePlan(plan, {});
  ASSERT_EQ(outline.size(), 1u);
  EXPECT_EQ(outline[0].steps.size(), kMaxPlannedSteps);
  EXPECT_TRUE(outline[0].truncated);
  EXPECT_EQ(outline[0].steps.back().id,
            "wide:1.c" + std::to_string(kMaxPlannedSteps) + ".1");
}

TEST(PlanOutlineTest, ADamagedOutlineReadsAsEmpty) {
  EXPECT_TRUE(OutlineFromJson(nlohmann::json::parse("{}")).empty());
  auto odd = OutlineFromJson(nlohmann::json::parse(
      R"([{"name": "j", "truncated": "yes", "steps": [1, {"id": 2,
          "line": "x", "timeout_ms": "y"}]}, 3])"));
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_FALSE(odd[0].truncated);
  ASSERT_EQ(odd[0].steps.size(), 1u);
  EXPECT_EQ(odd[0].steps[0].id, "");
  EXPECT_EQ(odd[0].steps[0].timeout_ms, std::nullopt);
}

pipeline::StepRef AgentRef() {
  pipeline::StepRef r;
  r.id = "review:1";
  r.job = "review";
  r.name = "reviewer";
  r.kind = pipeline::StepKind::kAgent;
  return r;
}

class TimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(StorePath(dir_.path()));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
  }

  // An agent step with two turns, 1 s and 3 s after it started, and a
  // nudge 2.5 s after; `log` is the line the nudge event sends.
  StoredStep Conversation(const std::string& nudge_line) {
    RunRecorder recorder(*store_, clock_);
    pipeline::RunRecord run;
    run.id = "20261130-070000-0002";
    run.started = clock_.WallNow();
    recorder.OnRunStart(run);
    recorder.OnJobStart("review", std::nullopt);
    const pipeline::StepRef ref = AgentRef();
    recorder.OnStepStart(ref, std::nullopt);
    agent::AgentTurnRecord t1;
    t1.turn = 1;
    t1.prompt_tokens = 100;
    t1.completion_tokens = 20;
    clock_.Advance(Millis(1000));
    recorder.OnAgentTurn(ref, t1);
    clock_.Advance(Millis(1500));
    recorder.OnLog(ref, nudge_line);
    agent::AgentTurnRecord t2 = t1;
    t2.turn = 2;
    clock_.Advance(Millis(500));
    recorder.OnAgentTurn(ref, t2);
    clock_.Advance(Millis(4000));  // Ends well after its last turn.
    pipeline::StepRecord rec;
    rec.ref = ref;
    rec.started = run.started;
    rec.agent.emplace();
    rec.agent->turns = 2;
    rec.agent->prompt_tokens = 200;
    rec.agent->completion_tokens = 40;
    rec.agent->turn_records = {t1, t2};
    recorder.OnStepEnd(rec);
    Result<StoredRun> stored = LoadRun(*store_, run.id);
    EXPECT_TRUE(stored.ok()) << stored.status().message();
    if (!stored.ok() || stored->jobs.empty() || stored->jobs[0].steps.empty())
      return {};
    started_ms_ = stored->started_ms;
    tokens_ = stored->prompt_tokens + stored->completion_tokens;
    return stored->jobs[0].steps[0];
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  FakeClock clock_;
  int64_t started_ms_ = 0;
  int64_t tokens_ = 0;
};

TEST_F(TimesTest, TurnsKeepWhenTheyAnsweredAndTheNudgeWhenItWasSent) {
  StoredStep s =
      Conversation("INF agent.nudge agent=reviewer remaining=1s timeout=5s");
  ASSERT_EQ(s.turns.size(), 2u);
  // The rewrite at the step's end keeps each turn's own time.
  EXPECT_EQ(s.turns[0].at_ms, started_ms_ + 1000);
  EXPECT_EQ(s.turns[1].at_ms, started_ms_ + 3000);
  EXPECT_EQ(s.nudge_ms, started_ms_ + 2500);
  EXPECT_EQ(tokens_, 240) << "the run's spend is its steps' totals";
}

TEST_F(TimesTest, OtherLogLinesAreNoNudge) {
  StoredStep s = Conversation(
      "WRN agent.request_retry agent=reviewer note=\"agent.nudge later\"");
  EXPECT_EQ(s.nudge_ms, std::nullopt);
}

TEST(OutlineSchemaTest, AVersionTwoStoreGainsTheColumns) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().message();
    // A store as version 2 wrote it, with one run in it.
    ASSERT_TRUE((*store)
                    ->Write([](Db& db) {
                      return db.Exec(
                          "ALTER TABLE runs DROP COLUMN plan;"
                          " ALTER TABLE agent_turns DROP COLUMN at_ms;"
                          " ALTER TABLE steps DROP COLUMN nudge_ms;"
                          " INSERT INTO runs (id, file, status, started_ms,"
                          " duration_ms, taken_by, host, pid, pid_start)"
                          " VALUES ('old', 'p.yaml', 'succeeded', 1, 2, 'u',"
                          " 'h', 1, '');"
                          " PRAGMA user_version = 2");
                    })
                    .ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  Result<StoredRun> old = LoadRun(**store, "old");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->plan.empty());
  EXPECT_EQ(old->prompt_tokens + old->completion_tokens, 0);
  EXPECT_EQ(old->usd, 0);
  // And records a new run's outline.
  RunRecorder recorder(**store);
  PlannedJob job;
  job.name = "j";
  job.steps.push_back({"j:1", "s", "task", "", 3, 5000});
  recorder.SetPlan({job});
  pipeline::RunRecord run;
  run.id = "new";
  run.started = RealClock().WallNow();
  recorder.OnRunStart(run);
  Result<StoredRun> fresh = LoadRun(**store, "new");
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  ASSERT_EQ(fresh->plan.size(), 1u);
  ASSERT_EQ(fresh->plan[0].steps.size(), 1u);
  EXPECT_EQ(fresh->plan[0].steps[0].id, "j:1");
  EXPECT_EQ(fresh->plan[0].steps[0].timeout_ms, 5000);
}

}  // namespace
}  // namespace steps::store
