// What `steps resume` reads back (LoadResumePoint) from runs the recorder
// wrote on a fake clock: finished and in-flight steps, the time spent
// (alive time, downtime not counted), hooks that ran because of the abort,
// and how a changed pipeline file is described.
#include "store/resume.h"

#include <gtest/gtest.h>

#include "store/recorder.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using std::chrono::seconds;
using store_testing::TempDir;

pipeline::StepRef Ref(const std::string& id, const std::string& name) {
  pipeline::StepRef r;
  r.id = "j:" + id;
  r.job = "j";
  r.name = name;
  return r;
}

int64_t Ms(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.time_since_epoch())
      .count();
}

class ResumePointTest : public ::testing::Test {
 protected:
  ResumePointTest() {
    auto opened = Store::Open(StorePath(dir_.path()));
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
    run_.id = "20261201-063000-abcd";
    run_.file = "p.yaml";
  }

  void EndStep(RunRecorder& rec, const pipeline::StepRef& ref, Outcome o,
               WallTime started) {
    pipeline::StepRecord s;
    s.ref = ref;
    s.outcome = o;
    s.started = started;
    s.duration = std::chrono::duration_cast<Millis>(clock_.WallNow() - started);
    rec.OnStepEnd(s);
  }

  // Ends the run aborted at the clock's time.
  void Abort(RunRecorder& rec) {
    pipeline::JobRecord job;
    job.name = "j";
    job.outcome = Outcome::kAborted;
    job.started = start_;
    rec.OnJobEnd(job);
    run_.outcome = Outcome::kAborted;
    rec.OnRunEnd(run_);
  }

  // The first life of the run: `first` ends after 10 s, `second` starts
  // and is aborted at 40 s, after which its on_abort hook runs.
  void FirstLife() {
    RunRecorder rec(*store_, clock_);
    rec.SetFile("hash", "jobs: []\n");
    start_ = clock_.WallNow();
    run_.started = start_;
    rec.OnRunStart(run_);
    rec.OnJobStart("j", std::nullopt);
    rec.OnStepStart(Ref("1", "first"), std::nullopt);
    clock_.Advance(seconds(10));
    EndStep(rec, Ref("1", "first"), Outcome::kSucceeded, start_);
    const WallTime second = clock_.WallNow();
    rec.OnStepStart(Ref("2", "second"), std::nullopt);
    clock_.Advance(seconds(30));
    EndStep(rec, Ref("2", "second"), Outcome::kAborted, second);
    const WallTime hook = clock_.WallNow();
    rec.OnStepStart(Ref("2/on_abort", "tidy"), std::nullopt);
    EndStep(rec, Ref("2/on_abort", "tidy"), Outcome::kSucceeded, hook);
    Abort(rec);
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  pipeline::RunRecord run_;
  WallTime start_;
};

TEST_F(ResumePointTest, FinishedStepsStayInFlightOnesRestart) {
  FirstLife();
  Result<ResumePoint> p = LoadResumePoint(*store_, "", "", false);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->run_id, run_.id);
  EXPECT_EQ(p->status, "aborted");
  EXPECT_EQ(p->file_hash, "hash");
  EXPECT_EQ(p->died_ms, Ms(start_) + 40000);
  ASSERT_EQ(p->state.finished.size(), 1u);
  EXPECT_EQ(p->state.finished.at("j:1").outcome, Outcome::kSucceeded);
  // The hook ran because of the abort: the resumed run decides again.
  EXPECT_EQ(p->state.finished.count("j:2/on_abort"), 0u);
  // Nor is it resumed: its succeeded attempt would end it unrun.
  EXPECT_EQ(p->state.attempts.count("j:2/on_abort"), 0u);
  EXPECT_EQ(p->state.step_started.count("j:2/on_abort"), 0u);
  EXPECT_EQ(p->state.step_spent.at("j:2"), Millis(30000));
  EXPECT_EQ(p->state.job_spent.at("j"), Millis(40000));
  EXPECT_EQ(p->state.run_started, start_);
}

// An agent step in flight when the run was stopped: what its stored turns
// spent is read back (a cell's step on a node starts again, and the
// budgets around it are charged with this); a finished step's is not.
TEST_F(ResumePointTest, WhatAStepInFlightSpentIsReadBack) {
  {
    RunRecorder rec(*store_, clock_);
    rec.SetFile("hash", "jobs: []\n");
    start_ = clock_.WallNow();
    run_.started = start_;
    rec.OnRunStart(run_);
    rec.OnJobStart("j", std::nullopt);
    agent::AgentTurnRecord turn;
    turn.prompt_tokens = 100;
    turn.completion_tokens = 20;
    turn.usd = 0.25;
    rec.OnStepStart(Ref("1", "done"), std::nullopt);
    turn.turn = 1;
    rec.OnAgentTurn(Ref("1", "done"), turn);
    EndStep(rec, Ref("1", "done"), Outcome::kSucceeded, start_);
    rec.OnStepStart(Ref("2", "talking"), std::nullopt);
    for (int t = 1; t <= 2; ++t) {
      turn.turn = t;
      clock_.Advance(seconds(1));
      rec.OnAgentTurn(Ref("2", "talking"), turn);
      rec.OnCheckpoints(Ref("2", "talking"), {});  // As a cell's relay does.
    }
    rec.OnStepStart(Ref("3", "silent"), std::nullopt);
    Abort(rec);
  }
  Result<ResumePoint> p = LoadResumePoint(*store_, "", "", false);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->state.in_flight_spent.size(), 1u);
  EXPECT_EQ(p->state.in_flight_spent.at("j:2").tokens, 240);
  EXPECT_DOUBLE_EQ(p->state.in_flight_spent.at("j:2").usd, 0.5);
}

TEST_F(ResumePointTest, DowntimeDoesNotCount) {
  FirstLife();
  Result<ResumePoint> first = LoadResumePoint(*store_, "", "", false);
  ASSERT_TRUE(first.ok());
  clock_.Advance(seconds(60));  // Down for a minute.
  {
    RunRecorder rec(*store_, clock_);
    rec.SetResume(first->status, first->died_ms);
    rec.OnRunStart(run_);
    rec.OnJobStart("j", std::nullopt);
    rec.OnStepStart(Ref("2", "second"), std::nullopt);
    clock_.Advance(seconds(20));
    EndStep(rec, Ref("2", "second"), Outcome::kAborted,
            first->state.step_started.at("j:2"));
    Abort(rec);
  }
  Result<ResumePoint> p = LoadResumePoint(*store_, run_.id, "", false);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // 120 s since the job started, 60 of them down.
  EXPECT_EQ(p->state.job_spent.at("j"), Millis(60000));
  EXPECT_EQ(p->state.step_spent.at("j:2"), Millis(50000));
  // The in-flight step kept its id (no "j:2~2") and its first start.
  Result<StoredRun> run = LoadRun(*store_, run_.id);
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->interruptions.size(), 1u);
  EXPECT_EQ(run->interruptions[0].status, "aborted");
  EXPECT_EQ(run->interruptions[0].died_ms, Ms(start_) + 40000);
  EXPECT_EQ(run->interruptions[0].resumed_ms, Ms(start_) + 100000);
  for (const StoredStep& s : run->jobs[0].steps) {
    EXPECT_EQ(s.id.find('~'), std::string::npos) << s.id;
  }
}

TEST_F(ResumePointTest, FreshDeadlinesCarryNoTimeOver) {
  FirstLife();
  Result<ResumePoint> p = LoadResumePoint(*store_, "", "", true);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->state.job_spent.empty());
  EXPECT_TRUE(p->state.step_spent.empty());
  EXPECT_EQ(p->state.finished.size(), 1u);
}

TEST_F(ResumePointTest, OnlyAStoppedRunResumes) {
  EXPECT_EQ(LoadResumePoint(*store_, "", "", false).status().code(),
            StatusCode::kNotFound);
  FirstLife();
  EXPECT_EQ(LoadResumePoint(*store_, "", "other.yaml", false).status().code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(LoadResumePoint(*store_, "", "p.yaml", false).ok());
  RunRecorder rec(*store_, clock_);
  run_.outcome = Outcome::kSucceeded;
  rec.OnRunEnd(run_);
  Result<ResumePoint> ended = LoadResumePoint(*store_, run_.id, "", false);
  EXPECT_EQ(ended.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ended.status().message().find("is succeeded"), std::string::npos);
}

TEST(DescribeFileChangeTest, NamesTheFirstLineThatDiffers) {
  ResumePoint p;
  p.file = "p.yaml";
  p.file_text = "a\nb\nc\n";
  EXPECT_EQ(DescribeFileChange(p, "a\nb\nc\n"), "");
  EXPECT_EQ(DescribeFileChange(p, "a\nB\nc\n"), "p.yaml:2: was `b`, now `B`");
  EXPECT_EQ(DescribeFileChange(p, "a\nb\nc\nd\n"), "p.yaml:4: added `d`");
  EXPECT_EQ(DescribeFileChange(p, "a\nb\n"), "p.yaml:3: removed `c`");
  EXPECT_EQ(DescribeFileChange(p, "a\nb\nc"),
            "p.yaml: the line endings or the last newline changed");
}

}  // namespace
}  // namespace steps::store
