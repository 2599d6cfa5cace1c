// One across cell run by itself (Executor::RunCell), as `steps run --cell`
// runs it on a Slurm node: the same steps, ids, values and records as in a
// whole run, reported through the event stream.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeline/event_stream.h"
#include "pipeline/executor_test_util.h"

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
  task.job_left = 0ms;
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
  EXPECT_THAT(end.error, HasSubstr("has 4 cells, not 5"));
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
