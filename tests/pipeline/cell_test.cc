// One across cell run by itself (Executor::RunCell), as `steps run --cell`
// runs it on a Slurm node: the same steps, ids, values and records as in a
// whole run, reported through the event stream.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pipeline/event_stream.h"
#include "pipeline/executor_test_util.h"
#include "pipeline/explain.h"

namespace steps::pipeline {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kPipeline = R"(jobs:
- name: j
  timeout: 1h
  plan:
  - task: first
    run: echo first
  - do:
    - across:
      - { var: os, values: [linux, mac] }
      - { var: arch, values: [x86, arm] }
      do:
      - task: build
        run: echo "build $os/$arch"
      - task: check
        run: test "$os" = mac && echo checked-$arch
)";

// Runs `task` with the executor's events going through an EventWriter and
// read back by an EventReader into `into`.
CellEnd RunThroughStream(PipelineRun& run, const CellTask& task,
                         RunObserver& into, std::vector<std::string>* lines) {
  EventWriter writer([&](std::string_view l) { lines->emplace_back(l); },
                     RealClock());
  ExecutorOptions options = run.options;
  options.observer = &writer;
  options.run_id = "20261207-130000-abcd";
  Executor ex(*run.plan(), options);
  CellEnd end = ex.RunCell(task);
  writer.WriteCellEnd(end);
  EventReader reader(into, RealClock());
  for (const std::string& l : *lines) {
    Status s = reader.Feed(l);
    EXPECT_TRUE(s.ok()) << s.message() << "\n" << l;
  }
  EXPECT_TRUE(reader.end());
  return reader.end() ? *reader.end() : CellEnd{};
}

CellTask Cell(size_t index) {
  CellTask t;
  t.job = "j";
  t.path = {1, 0};  // The across inside the job's second step.
  t.block_id = "2.1";
  t.cell = index;
  return t;
}

TEST(CellTest, ACellRunsItsStepsWithItsValuesAndIdsAsInAWholeRun) {
  PipelineRun whole(kPipeline);
  whole.Run();
  PipelineRun run(kPipeline);
  std::vector<std::string> lines;
  // The third cell: os=mac arch=x86.
  const CellEnd end = RunThroughStream(run, Cell(2), run.observer(), &lines);
  EXPECT_EQ(end.outcome, Outcome::kSucceeded) << end.error;
  const std::vector<StepRecord>& steps = run.observer().steps;
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].ref.id, "j:2.1.c3.1");
  EXPECT_EQ(steps[1].ref.id, "j:2.1.c3.2");
  EXPECT_EQ(steps[0].ref.cell, "os=mac arch=x86");
  EXPECT_EQ(steps[1].output, "checked-x86\n");
  EXPECT_EQ(run.observer().output["build"], "build mac/x86\n");
  // The same records the cell has in a whole run.
  int matched = 0;
  for (const StepRecord& w : whole.observer().steps) {
    for (const StepRecord& c : steps) {
      if (w.ref.id != c.ref.id) continue;
      ++matched;
      EXPECT_EQ(w.ref.name, c.ref.name);
      EXPECT_EQ(w.ref.cell, c.ref.cell);
      EXPECT_EQ(w.ref.line, c.ref.line);
      EXPECT_EQ(w.outcome, c.outcome);
      EXPECT_EQ(w.output, c.output);
      EXPECT_EQ(w.attempts.size(), c.attempts.size());
    }
  }
  EXPECT_EQ(matched, 2);
  // Nothing of the job itself (its start, its other steps) is reported.
  for (const std::string& l : lines)
    EXPECT_THAT(l, ::testing::Not(HasSubstr("\"first\"")));
}

TEST(CellTest, AFailingCellEndsFailedAndSaysWhy) {
  PipelineRun run(kPipeline);
  std::vector<std::string> lines;
  const CellEnd end = RunThroughStream(run, Cell(1), run.observer(), &lines);
  EXPECT_EQ(end.outcome, Outcome::kFailed);
  EXPECT_THAT(end.error, HasSubstr("exit"));
  EXPECT_FALSE(end.caused_by_error);
  ASSERT_EQ(run.observer().steps.size(), 2u);
  EXPECT_EQ(run.observer().steps[1].ref.cell, "os=linux arch=arm");
}

// The job's deadline travels as the time it had left: none left, and the
// cell's first step is not started, saying it was the job's timeout.
TEST(CellTest, TheJobsDeadlineHoldsInTheCell) {
  PipelineRun run(kPipeline);
  std::vector<std::string> lines;
  CellTask task = Cell(0);
  task.job_deadline = RealClock().WallNow();
  const CellEnd end = RunThroughStream(run, task, run.observer(), &lines);
  EXPECT_EQ(end.outcome, Outcome::kFailed);
  EXPECT_THAT(end.error, HasSubstr("job 'j' passed its timeout of 1h"));
  ASSERT_EQ(run.observer().steps.size(), 1u);
  EXPECT_EQ(run.observer().steps[0].outcome, Outcome::kNotStarted);
  EXPECT_EQ(run.observer().steps[0].ref.id, "j:2.1.c1.1");
}

TEST(CellTest, ACellThatIsNotThereIsAnError) {
  PipelineRun run(kPipeline);
  Executor ex(*run.plan(), run.options);
  CellTask task = Cell(4);
  CellEnd end = ex.RunCell(task);
  EXPECT_EQ(end.outcome, Outcome::kErrored);
  EXPECT_THAT(end.error, HasSubstr("has no cell 5 (it has 4 cells;"));
  task = Cell(0);
  task.path = {0};  // A task, not an across block.
  end = ex.RunCell(task);
  EXPECT_EQ(end.outcome, Outcome::kErrored);
  EXPECT_THAT(end.error, HasSubstr("no across block"));
  task.path = {1, 7};
  EXPECT_EQ(ex.RunCell(task).outcome, Outcome::kErrored);
  task.job = "nope";
  EXPECT_THAT(ex.RunCell(task).error, HasSubstr("no job 'nope'"));
  EXPECT_TRUE(run.observer().steps.empty());
}

}  // namespace
}  // namespace steps::pipeline

namespace steps::pipeline {
namespace {

// Runs each remote cell here, in a second executor over the same plan, its
// events through the stream as `steps run --cell` sends them from a node.
class StreamedCells : public CellLauncher {
 public:
  StreamedCells(const ResolvedPlan& plan, ExecutorOptions base)
      : plan_(plan), base_(std::move(base)) {}

  CellEnd Run(const RemoteCell& cell, RunObserver& events) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent.push_back(cell);
    }
    EventReader reader(events, RealClock());
    EventWriter writer(
        [&](std::string_view l) {
          Status s = reader.Feed(l);
          EXPECT_TRUE(s.ok()) << s.message() << "\n" << l;
        },
        RealClock());
    ExecutorOptions o = base_;
    o.observer = &writer;
    o.abort = cell.cancel;
    o.cells = nullptr;
    Executor ex(plan_, o);
    writer.WriteCellEnd(ex.RunCell(cell.task));
    EXPECT_TRUE(reader.end());
    return reader.end() ? *reader.end() : CellEnd{};
  }

  std::mutex mu_;
  std::vector<RemoteCell> sent;

 private:
  const ResolvedPlan& plan_;
  ExecutorOptions base_;
};

constexpr const char* kRemote = R"(jobs:
- name: j
  timeout: 1h
  plan:
  - across:
    - { var: n, values: [a, b, c], max_in_flight: 2 }
    runner: slurm
    slurm: { cpus: 2, partition: debug }
    do:
    - task: one
      run: echo "one $n"
    - task: two
      run: test $n != b
  - task: after
    run: echo after
)";

TEST(RemoteCellTest, EachCellIsSentAndItsStepsAreTheJobsRecords) {
  PipelineRun run(kRemote);
  ASSERT_TRUE(run.plan());
  StreamedCells cells(*run.plan(), run.options);
  run.options.cells = &cells;
  const auto before = RealClock().WallNow();
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);  // Cell n=b fails.
  ASSERT_EQ(cells.sent.size(), 3u);
  std::set<size_t> indexes;
  for (const RemoteCell& c : cells.sent) {
    indexes.insert(c.task.cell);
    EXPECT_EQ(c.task.job, "j");
    EXPECT_EQ(c.task.path, std::vector<size_t>{0});
    EXPECT_EQ(c.task.block_id, "1");
    EXPECT_EQ(c.placement.cpus, 2);
    EXPECT_EQ(c.placement.partition, "debug");
    ASSERT_TRUE(c.task.job_deadline);
    // The job's 1h deadline, as a time of day (generous: within a minute).
    EXPECT_LT(*c.task.job_deadline - (before + 1h), 60s);
    EXPECT_GT(*c.task.job_deadline - (before + 1h), -60s);
  }
  EXPECT_EQ(indexes, (std::set<size_t>{0, 1, 2}));
  // Every cell's steps are in the job's record, with the ids and values a
  // local run gives them; the failing step ran, so it is in `execution`.
  std::map<std::string, Outcome> by_id;
  for (const StepRecord& s : job.steps) by_id[s.ref.id] = s.outcome;
  EXPECT_EQ(by_id["j:1.c1.1"], Outcome::kSucceeded);
  EXPECT_EQ(by_id["j:1.c2.2"], Outcome::kFailed);
  EXPECT_EQ(by_id["j:1.c3.2"], Outcome::kSucceeded);
  EXPECT_EQ(run.observer().output["one"].size(),
            std::string("one a\n").size() * 3);
  EXPECT_EQ(std::count(job.execution.begin(), job.execution.end(), "two"), 3);
  EXPECT_FALSE(by_id.count("j:2"));  // The job stopped at the failed block.
  for (const StepRecord& s : job.steps) {
    EXPECT_THAT(s.ref.cell, ::testing::MatchesRegex("n=[abc]")) << s.ref.id;
  }
}

// A resumed run sends each cell the steps of it that ended before the
// interruption: they are replayed on the node, not run again.
TEST(RemoteCellTest, AResumedCellReplaysWhatEndedAndRunsTheRest) {
  PipelineRun run(kRemote);
  ASSERT_TRUE(run.plan());
  ResumeState resume;
  resume.run_started = RealClock().WallNow();
  StepRecord stored;
  stored.ref.id = "j:1.c1.1";
  stored.ref.job = "j";
  stored.ref.name = "one";
  stored.output = "stored one a";
  resume.finished[stored.ref.id] = stored;
  StepRecord other = stored;  // Another job's step: not sent.
  other.ref.id = "k:1.c1.1";
  resume.finished[other.ref.id] = other;
  StreamedCells cells(*run.plan(), run.options);
  run.options.cells = &cells;
  run.options.resume = &resume;
  JobRecord job = run.RunJob();
  ASSERT_EQ(cells.sent.size(), 3u);
  for (const RemoteCell& c : cells.sent) {
    if (c.task.cell == 0) {
      ASSERT_EQ(c.task.finished.size(), 1u);
      EXPECT_EQ(c.task.finished[0].ref.id, "j:1.c1.1");
    } else {
      EXPECT_TRUE(c.task.finished.empty());
    }
  }
  const StepRecord* replayed = nullptr;
  for (const StepRecord& s : job.steps) {
    if (s.ref.id == "j:1.c1.1") replayed = &s;
  }
  ASSERT_NE(replayed, nullptr);
  EXPECT_TRUE(replayed->resumed);
  EXPECT_EQ(replayed->output, "stored one a");
  // Cell a's first step did not run again; its second did.
  EXPECT_EQ(run.observer().output["one"].find("one a"), std::string::npos);
  EXPECT_NE(std::find_if(job.steps.begin(), job.steps.end(),
                         [](const StepRecord& s) {
                           return s.ref.id == "j:1.c1.2" && !s.resumed &&
                                  s.outcome == Outcome::kSucceeded;
                         }),
            job.steps.end());
}

// A launcher whose cells report what `script` makes up.
class ScriptedCells : public CellLauncher {
 public:
  std::function<CellEnd(const RemoteCell&, RunObserver&)> script;
  CellEnd Run(const RemoteCell& cell, RunObserver& events) override {
    return script(cell, events);
  }
  void JobBudgetSpent(const std::string& job, const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu);
    told.emplace_back(job, why);
  }
  size_t Told() {
    std::lock_guard<std::mutex> lock(mu);
    return told.size();
  }
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> told;
};

StepRef CellStep(const RemoteCell& cell, const std::string& job, int n,
                 const std::string& name) {
  StepRef r;
  r.job = job;
  r.id = job + ":" + cell.task.block_id + ".c" +
         std::to_string(cell.task.cell + 1) + "." + std::to_string(n);
  r.name = name;
  return r;
}

// What a broken or hostile node says is not taken at its word: events for
// steps outside the cell are dropped, and a step or attempt it left open
// ends, errored, with the cell.
TEST(RemoteCellTest, ANodesStreamOnlyRecordsItsCellAndLeavesNothingOpen) {
  PipelineRun run(kRemote);
  ScriptedCells cells;
  cells.script = [](const RemoteCell& cell, RunObserver& events) -> CellEnd {
    StepRecord forged;
    forged.ref.job = "other";
    forged.ref.id = "other:9";
    forged.ref.name = "FORGED";
    events.OnStepStart(forged.ref, std::nullopt);
    events.OnStepEnd(forged);
    StepRecord outside;  // This job, not this cell.
    outside.ref = CellStep(cell, "j", 1, "one");
    outside.ref.id = "j:2";
    events.OnStepEnd(outside);
    const StepRef one = CellStep(cell, "j", 1, "one");
    events.OnStepStart(one, std::nullopt);
    events.OnAttemptStart(one, 1, 1, std::nullopt);
    if (cell.task.cell == 0) return {Outcome::kSucceeded, "", false};
    return {Outcome::kErrored, "steps on the node ended (killed by signal 9)",
            true};
  };
  run.options.cells = &cells;
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  std::map<std::string, const StepRecord*> by_id;
  for (const StepRecord& s : job.steps) by_id[s.ref.id] = &s;
  EXPECT_FALSE(by_id.count("other:9"));
  EXPECT_FALSE(by_id.count("j:2"));
  ASSERT_TRUE(by_id.count("j:1.c1.1"));
  const StepRecord& said_ok = *by_id["j:1.c1.1"];
  EXPECT_EQ(said_ok.outcome, Outcome::kErrored);
  EXPECT_THAT(said_ok.error, HasSubstr("said it ended while 'one' had not"));
  ASSERT_EQ(said_ok.attempts.size(), 1u);
  EXPECT_EQ(said_ok.attempts[0].outcome, Outcome::kErrored);
  const StepRecord& died = *by_id["j:1.c2.1"];
  EXPECT_EQ(died.outcome, Outcome::kErrored);
  EXPECT_THAT(died.error, HasSubstr("killed by signal 9"));
  for (const StepRecord& s : job.steps) EXPECT_NE(s.ref.name, "FORGED");
}

// A cell whose Slurm job was still queued at the job's deadline never
// started: its first step is recorded not started, and the job failed on
// its deadline.
TEST(RemoteCellTest, ACellQueuedPastTheJobsDeadlineNeverStarts) {
  PipelineRun run(kRemote);
  ScriptedCells cells;
  std::mutex mu;
  std::vector<Deadline> start_by;
  cells.script = [&](const RemoteCell& cell, RunObserver&) -> CellEnd {
    {
      std::lock_guard<std::mutex> lock(mu);
      start_by.push_back(cell.placement.start_by);
    }
    if (cell.task.cell != 1) return {Outcome::kSucceeded, "", false};
    CellEnd end{Outcome::kFailed,
                "Slurm job 5 was still in Slurm's queue when its time to "
                "start on a node passed; it was cancelled",
                false};
    end.queued_past_job_deadline = true;
    return end;
  };
  run.options.cells = &cells;
  const SteadyTime before = RealClock().Now();
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_FALSE(job.caused_by_error);
  ASSERT_EQ(start_by.size(), 3u);
  for (const Deadline& d : start_by) {
    // The job's 1 h deadline (generous: within a minute of this test's
    // start).
    ASSERT_TRUE(d.is_set());
    EXPECT_LT(d.at() - (before + 1h), 60s);
    EXPECT_GT(d.at() - (before + 1h), -60s);
  }
  std::map<std::string, const StepRecord*> by_id;
  for (const StepRecord& s : job.steps) by_id[s.ref.id] = &s;
  ASSERT_TRUE(by_id.count("j:1.c2.1"));
  const StepRecord& first = *by_id["j:1.c2.1"];
  EXPECT_EQ(first.outcome, Outcome::kNotStarted);
  EXPECT_THAT(first.error,
              HasSubstr("job 'j' passed its timeout of 1h while this cell's "
                        "Slurm job was queued (Slurm job 5 was still"));
}

// A cell's turns are charged to the job's budget as they come (not twice
// when its step ends), and once the job's budget is spent the launcher is
// told, once, while the cell still runs: the job's other cells stop.
TEST(RemoteCellTest, ACellsTurnsChargeTheJobsBudgetAsTheyCome) {
  PipelineRun run(R"(agents:
- name: a
  source: { model: mock/a }
jobs:
- name: j
  budget: { tokens: 250 }
  plan:
  - across:
    - { var: n, values: [a, b, c], max_in_flight: 1 }
    runner: slurm
    do:
    - agent: a
      messages: ["go"]
)");
  ScriptedCells cells;
  std::vector<size_t> told_after_turn;
  std::vector<int64_t> sent_spent;
  cells.script = [&](const RemoteCell& cell, RunObserver& events) -> CellEnd {
    sent_spent.push_back(cell.task.job_tokens_spent);
    StepRef ref = CellStep(cell, "j", 1, "a");
    ref.kind = StepKind::kAgent;
    events.OnStepStart(ref, std::nullopt);
    events.OnAttemptStart(ref, 1, 1, std::nullopt);
    agent::AgentTurnRecord turn;
    turn.turn = 1;
    turn.prompt_tokens = cell.task.cell == 0 ? 150 : 90;
    turn.completion_tokens = 10;
    events.OnAgentTurn(ref, turn);
    told_after_turn.push_back(cells.Told());
    AttemptRecord a;
    a.number = 1;
    a.of = 1;
    events.OnAttemptEnd(ref, a);
    StepRecord rec;
    rec.ref = ref;
    rec.attempts = {a};
    agent::AgentResult result;
    result.prompt_tokens = turn.prompt_tokens;
    result.completion_tokens = turn.completion_tokens;
    result.turns = 1;
    rec.agent = result;
    events.OnStepEnd(rec);
    return {Outcome::kSucceeded, "", false};
  };
  run.options.cells = &cells;
  JobRecord job = run.RunJob();
  // Cell 1: 160, not charged again at its end (else 320 would be spent).
  // Cell 2: 260 passes 250 at its turn, while it runs; told once only.
  EXPECT_EQ(told_after_turn, (std::vector<size_t>{0, 1, 1}));
  EXPECT_EQ(sent_spent, (std::vector<int64_t>{0, 160, 260}));
  ASSERT_EQ(cells.told.size(), 1u);
  EXPECT_EQ(cells.told[0].first, "j");
  EXPECT_EQ(cells.told[0].second, "token budget of 250 spent (260 used)");
  // The step whose turn passed the job's budget fails, although its node
  // (which saw its own 100 tokens) said it succeeded; so do its cell and
  // the job. The cell before it stays as it ended; the one after (whose
  // node here sends a turn all the same) fails too.
  ASSERT_EQ(job.steps.size(), 3u);
  EXPECT_EQ(job.steps[0].outcome, Outcome::kSucceeded);
  EXPECT_EQ(job.steps[2].outcome, Outcome::kFailed);
  EXPECT_THAT(job.steps[2].error, HasSubstr("(360 used)"));
  EXPECT_EQ(job.steps[1].outcome, Outcome::kFailed);
  const std::string words =
      "agent: job budget: token budget of 250 exceeded (260 used), counting "
      "the job's cells on other nodes";
  EXPECT_EQ(job.steps[1].error, words);
  ASSERT_EQ(job.steps[1].attempts.size(), 1u);
  EXPECT_EQ(job.steps[1].attempts[0].outcome, Outcome::kFailed);
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_FALSE(job.caused_by_error);
  EXPECT_THAT(job.error, HasSubstr(words));
  // Each relayed turn is stored as it comes (a durable point without
  // checkpoints, which stay on the node), for a resume to charge.
  EXPECT_EQ(run.observer().durability,
            (std::vector<std::string>{"turn j:1.c1.1", "durable j:1.c1.1 0",
                                      "turn j:1.c2.1", "durable j:1.c2.1 0",
                                      "turn j:1.c3.1", "durable j:1.c3.1 0"}));
}

// A run killed while a cell's agent step was in flight had charged the
// job's budget with its turns; the resumed run starts that conversation
// again on the node, and charges what it had spent before it sends the
// cell (only that cell's steps, once each).
TEST(RemoteCellTest, AResumedCellKeepsWhatItsStepInFlightHadSpent) {
  PipelineRun run(R"(agents:
- name: a
  source: { model: mock/a }
jobs:
- name: j
  budget: { tokens: 250 }
  plan:
  - across:
    - { var: n, values: [a, b], max_in_flight: 1 }
    runner: slurm
    do:
    - agent: a
      messages: ["go"]
)");
  ResumeState resume;
  resume.run_started = RealClock().WallNow();
  resume.in_flight_spent["j:1.c1.1"] = {200, 0.0};
  resume.in_flight_spent["j:1.c2.1"] = {30, 0.0};
  resume.in_flight_spent["k:1.c1.1"] = {1000, 0.0};  // Another job's.
  run.options.resume = &resume;
  ScriptedCells cells;
  std::vector<int64_t> sent_spent;
  cells.script = [&](const RemoteCell& cell, RunObserver&) -> CellEnd {
    sent_spent.push_back(cell.task.job_tokens_spent);
    return {Outcome::kSucceeded, "", false};
  };
  run.options.cells = &cells;
  run.RunJob();
  EXPECT_EQ(sent_spent, (std::vector<int64_t>{200, 230}));
  EXPECT_EQ(cells.Told(), 0u);
}

TEST(RemoteCellTest, WithoutASlurmRunnerEachCellIsAnError) {
  PipelineRun run(kRemote);
  JobRecord job = run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_TRUE(job.caused_by_error);
  int errored = 0;
  for (const StepRecord& s : job.steps) {
    if (s.ref.name != "one") continue;
    EXPECT_EQ(s.outcome, Outcome::kErrored);
    EXPECT_THAT(s.error, HasSubstr("this run has no Slurm runner"));
    ++errored;
  }
  EXPECT_EQ(errored, 3);
  EXPECT_TRUE(job.execution.empty());
}

// `--runner local` keeps the cells here; `--runner slurm` does not send
// cells that the file keeps here.
TEST(RemoteCellTest, TheCommandLineCanKeepCellsHere) {
  for (RunnerKind cli : {RunnerKind::kLocal, RunnerKind::kSlurm}) {
    std::string yaml = kRemote;
    if (cli == RunnerKind::kSlurm) {
      yaml.replace(yaml.find("    runner: slurm\n"),
                   std::string("    runner: slurm\n").size(),
                   "    runner: local\n");
    }
    LoadResult r = LoadPipelineText(yaml, "test.yaml");
    ASSERT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
    PlanOptions options;
    options.runner = cli;
    ResolvedPlan plan(r.pipeline, options);
    const Step& block = *r.pipeline->jobs[0].plan[0];
    EXPECT_EQ(plan.For(block).dials.runner.value, RunnerKind::kLocal);
  }
}

TEST(RemoteCellTest, ExplainSaysWhereTheCellsRun) {
  PipelineRun run(kRemote);
  ASSERT_TRUE(run.plan());
  const std::string text = Explain(*run.plan(), {});
  EXPECT_THAT(text, HasSubstr("each cell is one Slurm job running steps on a "
                              "node"));
  EXPECT_THAT(text, HasSubstr("--partition=debug --cpus-per-task=2"));
}

TEST(RemoteCellTest, WhatCannotRunInARemoteCellIsRefusedAtLoad) {
  const std::pair<const char*, const char*> refused[] = {
      {R"(jobs:
- name: j
  plan:
  - across:
    - { var: n, values: [a] }
    runner: slurm
    do:
    - gate: approve
      message: ok?
)",
       "nobody can decide a gate on a node"},
      {R"(jobs:
- name: j
  plan:
  - across:
    - { var: n, values: [a] }
    runner: slurm
    slurm: { retry_lost: true }
    do:
    - task: t
      run: "true"
)",
       "'slurm.retry_lost' applies to a task, get or put step's own Slurm job"},
      {R"(jobs:
- name: j
  plan:
  - do:
    - task: t
      run: "true"
    runner: slurm
)",
       "not to this block"},
      {R"(jobs:
- name: j
  plan:
  - task: t
    run: "true"
    on_failure:
      across:
      - { var: n, values: [a] }
      runner: slurm
      do:
      - task: u
        run: "true"
)",
       "sends its cells to Slurm (runner: slurm) from inside a hook"},
      {R"(jobs:
- name: j
  plan:
  - task: t
    run: "true"
  ensure:
    do:
    - across:
      - { var: n, values: [a] }
      runner: slurm
      do:
      - task: u
        run: "true"
)",
       "across block"},
  };
  for (const auto& [yaml, why] : refused) {
    LoadResult r = LoadPipelineText(yaml, "test.yaml");
    EXPECT_FALSE(r.pipeline) << yaml;
    EXPECT_THAT(r.diagnostics.FormatAll(), HasSubstr(why)) << yaml;
  }
}

}  // namespace
}  // namespace steps::pipeline
