// The recorder as an observer: events in, a run read back out; many threads
// at once; a run whose process is gone reads as interrupted.
#include "store/recorder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/conversation_log.h"
#include "store/listing.h"
#include "store/reader.h"
#include "store/run_json.h"
#include "store/run_lock.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using store_testing::TempDir;

pipeline::StepRef Ref(const std::string& id, const std::string& name,
                      pipeline::StepKind kind = pipeline::StepKind::kTask) {
  pipeline::StepRef r;
  r.id = "build:" + id;
  r.job = "build";
  r.name = name;
  r.kind = kind;
  return r;
}

// A read_file call of "a" that read "contents".
agent::ToolCallRecord ReadFileCall() {
  agent::ToolCallRecord call;
  call.name = "read_file";
  call.arguments = R"({"path":"a"})";
  call.result = "contents";
  call.result_bytes = 8;
  return call;
}

pipeline::AttemptRecord Attempt(int number, int of, Outcome o,
                                std::string error = "") {
  pipeline::AttemptRecord a;
  a.number = number;
  a.of = of;
  a.outcome = o;
  a.started = RealClock().WallNow();
  a.duration = Millis(number);
  a.error = std::move(error);
  return a;
}

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(StorePath(dir_.path()));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
    recorder_ = std::make_unique<RunRecorder>(*store_);
    run_.id = "20261130-070000-abcd";
    run_.file = "pipeline.yaml";
    run_.started = RealClock().WallNow();
    run_.taken_by = "ops@server-1";
  }

  // A step with its attempts, through the events the executor sends.
  void RunStep(const pipeline::StepRef& ref,
               std::vector<pipeline::AttemptRecord> attempts, Outcome outcome,
               std::string error = "") {
    recorder_->OnStepStart(ref, std::nullopt);
    for (const auto& a : attempts) {
      recorder_->OnAttemptStart(ref, a.number, a.of, std::nullopt);
      recorder_->OnOutput(ref, OutputStream::kStdout, "line");
      recorder_->OnAttemptEnd(ref, a);
    }
    pipeline::StepRecord rec;
    rec.ref = ref;
    rec.outcome = outcome;
    rec.error = std::move(error);
    rec.identity = "44136fa3deadbeef";
    rec.started = RealClock().WallNow();
    rec.attempts = std::move(attempts);
    recorder_->OnStepEnd(rec);
  }

  // As `steps run` records: `step`'s attempt starts with 300 ms to go, what
  // is queued is committed, and then another process holds the store (in
  // `held`). Returns when the attempt started.
  std::chrono::steady_clock::time_point StartAttemptThenHoldStore(
      const pipeline::StepRef& step,
      std::optional<store_testing::HeldStore>& held,
      Millis attempt_time = Millis(300)) {
    store_->WaitForLocksUntil(abort_);
    recorder_->OnRunStart(run_);
    recorder_->OnJobStart("build", std::nullopt);
    recorder_->OnStepStart(step, std::nullopt);
    const auto start = std::chrono::steady_clock::now();
    recorder_->OnAttemptStart(step, 1, 1, RealClock().Now() + attempt_time);
    EXPECT_TRUE(store_->Flush().ok());
    held.emplace(StorePath(dir_.path()));
    return start;
  }

  int64_t Count(const std::string& sql) {
    int64_t n = -1;
    EXPECT_TRUE(store_
                    ->Read([&](Db& db) -> Status {
                      Result<StatementUse> st = db.Prepared(sql);
                      if (!st.ok()) return st.status();
                      Result<bool> row = (*st)->Step();
                      if (!row.ok()) return row.status();
                      if (*row) n = (*st)->Int(0);
                      return Status::Ok();
                    })
                    .ok());
    return n;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RunRecorder> recorder_;
  pipeline::RunRecord run_;
  CancelToken abort_;
};

TEST_F(RecorderTest, ARunIsReadBackWithJobsStepsHooksAttemptsAndTurns) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  RunStep(Ref("1", "fetch"),
          {Attempt(1, 3, Outcome::kFailed, "exited with code 1"),
           Attempt(2, 3, Outcome::kFailed, "exited with code 1"),
           Attempt(3, 3, Outcome::kSucceeded)},
          Outcome::kSucceeded);

  // An agent step with two turns.
  pipeline::StepRef review = Ref("2", "review", pipeline::StepKind::kAgent);
  recorder_->OnStepStart(review, RealClock().Now() + Millis(60000));
  recorder_->OnAttemptStart(review, 1, 1, std::nullopt);
  agent::AgentResult ar;
  ar.outcome = Outcome::kSucceeded;
  ar.turns = 2;
  ar.provider_requests = 3;
  ar.prompt_tokens = 100;
  ar.completion_tokens = 20;
  ar.usd = 0.5;
  ar.nudge_sent = true;
  ar.fallbacks_taken = {"openai/b"};
  for (int t = 1; t <= 2; ++t) {
    agent::AgentTurnRecord turn;
    turn.turn = t;
    turn.provider_requests = t;
    turn.source = "openai/a";
    turn.prompt_tokens = 50;
    turn.completion_tokens = 10;
    if (t == 1) turn.tool_calls = {ReadFileCall()};
    recorder_->OnAgentTurn(review, turn);
    ar.turn_records.push_back(turn);
  }
  pipeline::AttemptRecord a = Attempt(1, 1, Outcome::kSucceeded);
  recorder_->OnAttemptEnd(review, a);
  pipeline::StepRecord rec;
  rec.ref = review;
  rec.outcome = Outcome::kSucceeded;
  rec.output = "LGTM";
  rec.attempts = {a};
  rec.agent = ar;
  recorder_->OnStepEnd(rec);

  pipeline::StepRef hook = Ref("job/on_success", "notify");
  hook.hook = pipeline::HookKind::kOnSuccess;
  RunStep(hook, {Attempt(1, 1, Outcome::kSucceeded)}, Outcome::kSucceeded);

  pipeline::JobRecord job;
  job.name = "build";
  job.outcome = Outcome::kSucceeded;
  job.execution = {"fetch", "review", "notify"};
  recorder_->OnJobEnd(job);
  run_.outcome = Outcome::kSucceeded;
  run_.duration = Millis(1234);
  recorder_->OnRunEnd(run_);

  Result<StoredRun> got = LoadRun(*store_, "");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->id, run_.id);
  EXPECT_EQ(got->status, "succeeded");
  EXPECT_EQ(got->duration_ms, 1234);
  EXPECT_EQ(got->taken_by, "ops@server-1");
  ASSERT_EQ(got->jobs.size(), 1u);
  const StoredJob& j = got->jobs[0];
  EXPECT_EQ(j.execution, job.execution);
  ASSERT_EQ(j.steps.size(), 3u);
  EXPECT_EQ(j.steps[0].name, "fetch");
  ASSERT_EQ(j.steps[0].attempts.size(), 3u);
  EXPECT_EQ(j.steps[0].attempts[0].status, "failed");
  EXPECT_EQ(j.steps[0].attempts[0].error, "exited with code 1");
  EXPECT_EQ(j.steps[0].attempts[2].status, "succeeded");
  EXPECT_EQ(j.steps[0].attempts[2].identity, "44136fa3deadbeef");
  EXPECT_EQ(j.steps[0].attempts[2].taken_by, "ops@server-1");
  const StoredStep& r = j.steps[1];
  ASSERT_TRUE(r.agent.has_value());
  EXPECT_EQ(r.agent->turns, 2);
  EXPECT_EQ(r.agent->provider_requests, 3);
  EXPECT_EQ(r.agent->prompt_tokens, 100);
  EXPECT_TRUE(r.agent->nudge_sent);
  EXPECT_EQ(r.agent->fallbacks_taken, std::vector<std::string>{"openai/b"});
  ASSERT_EQ(r.turns.size(), 2u);
  ASSERT_EQ(r.turns[0].tool_calls.size(), 1u);
  EXPECT_EQ(r.turns[0].tool_calls[0].name, "read_file");
  EXPECT_EQ(r.turns[0].tool_calls[0].arguments, R"({"path":"a"})");
  EXPECT_EQ(r.turns[0].tool_calls[0].result, "contents");
  EXPECT_EQ(r.turns[0].tool_calls[0].result_bytes, 8);
  EXPECT_TRUE(r.deadline_ms.has_value());
  EXPECT_EQ(j.steps[2].hook, "on_success");
  EXPECT_EQ(Count("SELECT count(*) FROM hooks"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM output_lines"), 4);

  // The JSON carries the record's own names.
  nlohmann::json js = RunToJson(*got);
  EXPECT_EQ(js["jobs"][0]["steps"][0]["attempts"][2]["outcome"], "succeeded");
  const nlohmann::json& turns = js["jobs"][0]["steps"][1]["turns"];
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_EQ(turns[0]["tool_calls"][0],
            nlohmann::json::parse(R"({"name": "read_file",
              "arguments": {"path": "a"}, "arguments_truncated": false,
              "result": {"text": "contents", "bytes": 8, "truncated": false,
                         "is_error": false}})"));
}

// The nudge's record waits for a store another process holds no longer
// than its attempt's time: the conversation is not held past its deadline.
TEST_F(RecorderTest, TheNudgesWriteWaitsNoLongerThanItsAttempt) {
  const pipeline::StepRef review =
      Ref("2", "review", pipeline::StepKind::kAgent);
  std::optional<store_testing::HeldStore> held;
  const auto start = StartAttemptThenHoldStore(review, held);
  auto logged = std::async(std::launch::async, [&] {
    recorder_->OnLog(review,
                     "INF agent.nudge agent=review remaining=6s of=30s");
  });
  // Generous: 300 ms, and a loaded machine.
  const bool soon =
      logged.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  held->Release();  // Without the limit, the write waits for this.
  logged.get();
  EXPECT_TRUE(soon);
  EXPECT_GE(std::chrono::steady_clock::now() - start, Millis(300));
}

// A task whose output fills the store's queue while another process holds
// the store is not held by it: its lines stay queued, and its step goes on
// within its own time (a minute here), not the other process's.
TEST_F(RecorderTest, OutputThatFillsTheQueueIsNotHeldByAnotherProcess) {
  const pipeline::StepRef chatty = Ref("1", "chatty");
  std::optional<store_testing::HeldStore> held;
  StartAttemptThenHoldStore(chatty, held, std::chrono::minutes(1));
  // Past Store::kSoonFlushBytes in a few lines.
  const std::string line(64 << 10, 'x');
  const size_t lines = Store::kSoonFlushBytes / line.size() + 8;
  auto printed = std::async(std::launch::async, [&] {
    for (size_t i = 0; i < lines; ++i)
      recorder_->OnOutput(chatty, OutputStream::kStdout, line);
  });
  // Generous: the first full queue waits 100 ms, and a loaded machine.
  const bool soon =
      printed.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  held->Release();  // Without the change, the output waits for this.
  printed.get();
  EXPECT_TRUE(soon);
  // Nothing was lost: the lines stayed queued, and go with the next commit.
  ASSERT_TRUE(store_->Flush().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM output_lines"),
            static_cast<int64_t>(lines));
}

// A step served from the cache runs nothing: its attempt's start is no
// durable point and waits for no busy store (it used to wait up to the
// step's timeout); it is stored with its end once the lock is let go.
TEST_F(RecorderTest, AReplayedStepsStartDoesNotWaitForABusyStore) {
  pipeline::StepRef replay = Ref("1", "hello");
  replay.replayed = true;
  std::optional<store_testing::HeldStore> held;
  StartAttemptThenHoldStore(Ref("0", "before"), held, std::chrono::minutes(1));
  auto replayed = std::async(std::launch::async, [&] {
    recorder_->OnStepStart(replay, std::nullopt);
    recorder_->OnAttemptStart(replay, 1, 1,
                              RealClock().Now() + std::chrono::minutes(1));
    recorder_->OnOutput(replay, OutputStream::kStdout, "hello");
    recorder_->OnAttemptEnd(replay, Attempt(1, 1, Outcome::kSucceeded));
  });
  // Generous: no wait at all is expected.
  const bool soon =
      replayed.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  held->Release();  // Without the change, the start waits for this.
  replayed.get();
  EXPECT_TRUE(soon);
  ASSERT_TRUE(store_->Flush().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE step_id = 'build:1' AND"
                  " status = 'succeeded'"),
            1);
  EXPECT_EQ(Count("SELECT count(*) FROM output_lines WHERE step_id = 'build:1'"), 1);
}

TEST_F(RecorderTest, AStepsStartAndOutputRideWithItsAttempt) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  const pipeline::StepRef ref = Ref("1-compile", "compile");
  const int64_t before = store_->commits();
  recorder_->OnStepStart(ref, std::nullopt);
  recorder_->OnAttemptStart(ref, 1, 1, std::nullopt);
  for (int i = 1; i <= 20; ++i) {
    recorder_->OnOutput(ref, OutputStream::kStdout,
                        "line " + std::to_string(i));
  }
  recorder_->OnAttemptEnd(ref, Attempt(1, 1, Outcome::kSucceeded));
  // Nothing follows the attempt's end here: it waits no longer than
  // Store::kEndLinger for a transaction to ride with (Flush cuts that).
  ASSERT_TRUE(store_->Flush().ok());
  // Two transactions for 23 events: the step's start rides with the
  // attempt's start (durable before its task runs), the output lines with
  // the attempt's end. The store's flusher ticks every 100 ms and may have
  // committed some lines on its own first: one more at most.
  EXPECT_LE(store_->commits() - before, 3);
  EXPECT_GE(store_->commits() - before, 2);
  EXPECT_EQ(Count("SELECT count(*) FROM steps WHERE status = 'running'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE number = 1"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM output_lines"), 20);
  EXPECT_EQ(Count("SELECT seq FROM output_lines WHERE line = 'line 20'"), 20);
}

// In a sequence of tasks, an attempt's end and its step's end ride with
// the next attempt's start: durable before the next task runs, in one
// transaction with it.
TEST_F(RecorderTest, AStepsEndRidesWithTheNextAttemptsStart) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  const pipeline::StepRef first = Ref("1", "first");
  const pipeline::StepRef second = Ref("2", "second");
  recorder_->OnStepStart(first, std::nullopt);
  recorder_->OnAttemptStart(first, 1, 1, std::nullopt);
  const int64_t before = store_->commits();
  recorder_->OnAttemptEnd(first, Attempt(1, 1, Outcome::kSucceeded));
  pipeline::StepRecord rec;
  rec.ref = first;
  rec.outcome = Outcome::kSucceeded;
  rec.output = "done";
  rec.attempts = {Attempt(1, 1, Outcome::kSucceeded)};
  recorder_->OnStepEnd(rec);
  recorder_->OnStepStart(second, std::nullopt);
  recorder_->OnAttemptStart(second, 1, 1, std::nullopt);
  const int64_t commits = store_->commits() - before;
  // One transaction, or two when the store's flusher found the ends older
  // than kEndLinger (a slow machine) and committed them first.
  EXPECT_GE(commits, 1);
  EXPECT_LE(commits, 2);
  // Read from a connection of its own: nothing is flushed for it.
  Result<std::unique_ptr<Store>> other =
      Store::OpenExisting(StorePath(dir_.path()));
  ASSERT_TRUE(other.ok()) << other.status().message();
  int64_t ended = -1;
  ASSERT_TRUE((*other)
                  ->Read([&](Db& db) -> Status {
                    Result<StatementUse> st = db.Prepared(
                        "SELECT count(*) FROM steps WHERE name = 'first'"
                        " AND status = 'succeeded' AND output = 'done'");
                    if (!st.ok()) return st.status();
                    Result<bool> row = (*st)->Step();
                    if (!row.ok()) return row.status();
                    ended = (*st)->Int(0);
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(ended, 1) << "the first step's end is durable once the second "
                         "attempt's start is";
}

// An end that nothing follows is committed by the store itself, within
// Store::kEndLinger of being queued, not at the flusher's 100 ms tick.
// Tolerance: 50 ms for the flusher thread to be scheduled on a loaded
// machine; three ends, so that a flusher waiting for its tick instead
// (uniform over 100 ms) passes all three by chance one time in eight.
TEST_F(RecorderTest, AnEndNothingFollowsIsCommittedWithinAMillisecond) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  std::mutex mu;
  std::condition_variable cv;
  int64_t committed = store_->commits();
  store_->SetAfterCommit([&](int64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    committed = n;
    cv.notify_all();
  });
  for (int i = 1; i <= 3; ++i) {
    const pipeline::StepRef ref = Ref(std::to_string(i), "s");
    recorder_->OnStepStart(ref, std::nullopt);
    recorder_->OnAttemptStart(ref, 1, 1, std::nullopt);
    int64_t before;
    {
      std::lock_guard<std::mutex> lock(mu);
      before = committed;
    }
    const auto queued = std::chrono::steady_clock::now();
    recorder_->OnAttemptEnd(ref, Attempt(1, 1, Outcome::kSucceeded));
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] {
      return committed > before;
    })) << "the end is committed without a write to ride with";
    EXPECT_LT(std::chrono::steady_clock::now() - queued,
              std::chrono::milliseconds(50))
        << "end " << i;
  }
  store_->SetAfterCommit(nullptr);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE status = 'succeeded'"),
            3);
}

// An end is never dropped from the store's queue, however much output its
// attempts kept: here more than the queue's whole byte limit.
TEST_F(RecorderTest, AStepsEndWithMoreOutputThanTheQueueHoldsIsRecorded) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  const pipeline::StepRef ref = Ref("1", "chatty");
  recorder_->OnStepStart(ref, std::nullopt);
  constexpr size_t kKept = 1 << 20;  // The most a task's attempt keeps.
  const int count = static_cast<int>(Store::kMaxSoonBytes / kKept) + 2;
  pipeline::StepRecord rec;
  rec.ref = ref;
  rec.outcome = Outcome::kFailed;
  for (int i = 1; i <= count; ++i) {
    recorder_->OnAttemptStart(ref, i, count, std::nullopt);
    pipeline::AttemptRecord a = Attempt(i, count, Outcome::kFailed);
    a.output = std::string(kKept, 'x');
    recorder_->OnAttemptEnd(ref, a);
    rec.attempts.push_back(std::move(a));
  }
  recorder_->OnStepEnd(rec);
  ASSERT_TRUE(store_->Flush().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM steps WHERE status = 'failed'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE status = 'failed'"),
            count);
}

// A queued end holds what it writes by value: the recorder may be gone
// when the store commits it (under AddressSanitizer, a write that reached
// back into the recorder would fail this test).
TEST_F(RecorderTest, AQueuedEndOutlivesItsRecorder) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  const pipeline::StepRef ref = Ref("1", "s");
  recorder_->OnStepStart(ref, std::nullopt);
  recorder_->OnAttemptStart(ref, 1, 1, std::nullopt);
  recorder_->OnAttemptEnd(ref, Attempt(1, 1, Outcome::kSucceeded));
  pipeline::StepRecord rec;
  rec.ref = ref;
  rec.outcome = Outcome::kSucceeded;
  rec.attempts = {Attempt(1, 1, Outcome::kSucceeded)};
  recorder_->OnStepEnd(rec);
  recorder_.reset();
  ASSERT_TRUE(store_->Flush().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM steps WHERE status = 'succeeded'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE run_id = '" + run_.id +
                  "' AND status = 'succeeded'"),
            1);
}

// A step's end writes again only the turns whose stored row is not what
// its record says: a turn stored as reported is left alone (its time
// kept), one the record changed since, and one never stored, are written.
TEST_F(RecorderTest, AStepsEndWritesAgainOnlyTheTurnsItsRecordChanged) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef review = Ref("1", "review", pipeline::StepKind::kAgent);
  recorder_->OnStepStart(review, std::nullopt);
  recorder_->OnAttemptStart(review, 1, 1, std::nullopt);
  std::vector<agent::AgentTurnRecord> turns(4);
  for (int t = 1; t <= 4; ++t) {
    agent::AgentTurnRecord& turn = turns[t - 1];
    turn.turn = t;
    turn.provider_requests = 1;
    turn.source = "openai/a";
    turn.text = "turn " + std::to_string(t);
    turn.tool_calls = {ReadFileCall()};
  }
  for (int t = 0; t < 3; ++t) recorder_->OnAgentTurn(review, turns[t]);
  recorder_->WriteReportedTurns(review);
  EXPECT_EQ(recorder_->turn_rows_written(), 3);
  const int64_t first_at =
      Count("SELECT at_ms FROM agent_turns WHERE turn = 1");
  ASSERT_GT(first_at, 0);
  ASSERT_TRUE(store_
                  ->Write([&](Db& db) -> Status {
                    return db.Exec("UPDATE agent_turns SET at_ms = 7");
                  })
                  .ok());

  recorder_->OnAgentTurn(review, turns[3]);  // Rides with the step's end.
  turns[1].tool_calls[0].result = "changed after it was reported";
  turns[2].usd = 0.25;
  agent::AgentResult ar;
  ar.outcome = Outcome::kSucceeded;
  ar.turns = 4;
  ar.turn_records = turns;
  pipeline::AttemptRecord a = Attempt(1, 1, Outcome::kSucceeded);
  recorder_->OnAttemptEnd(review, a);
  pipeline::StepRecord rec;
  rec.ref = review;
  rec.outcome = Outcome::kSucceeded;
  rec.attempts = {a};
  rec.agent = ar;
  recorder_->OnStepEnd(rec);
  ASSERT_TRUE(store_->Flush().ok());

  // Turn 4 as reported, turns 2 and 3 as the record changed them.
  EXPECT_EQ(recorder_->turn_rows_written(), 6);
  EXPECT_EQ(Count("SELECT count(*) FROM agent_turns"), 4);
  EXPECT_EQ(Count("SELECT count(*) FROM agent_turns WHERE at_ms = 7"), 3)
      << "a rewritten row keeps its time";
  EXPECT_EQ(Count("SELECT count(*) FROM agent_turns WHERE turn = 2 AND"
                  " tool_calls LIKE '%changed after it was reported%'"),
            1);
  EXPECT_EQ(Count("SELECT count(*) FROM agent_turns WHERE turn = 3 AND"
                  " usd = 0.25"),
            1);
  EXPECT_EQ(Count("SELECT count(*) FROM agent_turns WHERE turn = 4 AND"
                  " text = 'turn 4'"),
            1);
}

TEST_F(RecorderTest, ToolCallsOfAnOlderStoreReadAsObjects) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef review = Ref("1", "review", pipeline::StepKind::kAgent);
  recorder_->OnStepStart(review, std::nullopt);
  agent::AgentTurnRecord turn;
  turn.turn = 1;
  recorder_->OnAgentTurn(review, turn);
  recorder_->WriteReportedTurns(review);
  // As stores wrote them before calls kept their results: "NAME ARGS",
  // cut at 300 bytes with "...".
  const std::string cut =
      R"(write_file {"text": ")" + std::string(280, 'x') + "...";
  const nlohmann::json legacy = {R"(read_file {"path":"a"})", "list_files",
                                 cut};
  ASSERT_TRUE(store_
                  ->Write([&](Db& db) -> Status {
                    Result<StatementUse> st =
                        db.Prepared("UPDATE agent_turns SET tool_calls = ?1");
                    if (!st.ok()) return st.status();
                    (*st)->Bind(1, legacy.dump());
                    return (*st)->Run();
                  })
                  .ok());
  Result<StoredRun> got = LoadRun(*store_, run_.id);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const nlohmann::json calls =
      RunToJson(*got)["jobs"][0]["steps"][0]["turns"][0]["tool_calls"];
  ASSERT_EQ(calls.size(), 3u) << calls;
  EXPECT_EQ(calls[0]["name"], "read_file");
  EXPECT_EQ(calls[0]["arguments"], nlohmann::json({{"path", "a"}}));
  EXPECT_TRUE(calls[0]["result"].is_null());
  EXPECT_EQ(calls[1]["name"], "list_files");
  EXPECT_EQ(calls[1]["arguments"], "");
  EXPECT_EQ(calls[2]["name"], "write_file");
  EXPECT_EQ(calls[2]["arguments_truncated"], true);
  EXPECT_EQ(calls[2]["arguments"], cut.substr(11)) << "the raw text";
}

// Checkpoints are appended in order and read back as written: messages
// with their tool calls, ids and names, bytes and newlines included.
TEST_F(RecorderTest, CheckpointsReadBackAsWritten) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef review = Ref("1", "review", pipeline::StepKind::kAgent);
  recorder_->OnStepStart(review, std::nullopt);
  using Kind = agent::ConversationCheckpoint::Kind;
  std::vector<agent::ConversationCheckpoint> written(4);
  written[0].kind = Kind::kRequest;
  written[0].turn = 1;
  written[0].messages = {Message::System("Be brief.\n\nDeadline: 30m"),
                         Message::User("Fix \"it\"\twith ünïcode")};
  written[0].nudge = true;
  written[1].kind = Kind::kAnswer;
  written[1].turn = 1;
  written[1].messages = {
      Message::Assistant("", {{"call_1", "read_file", R"({"path":"a"})"}})};
  written[1].source = "openai/m";
  written[1].provider_requests = 2;
  written[1].prompt_tokens = 120;
  written[1].completion_tokens = 7;
  written[1].usd = 0.1 + 0.2;  // Read back exactly, not 0.3.
  written[2].kind = Kind::kToolStarted;
  written[2].turn = 1;
  written[2].call_id = "call_1";
  written[2].tool = "read_file";
  written[2].arguments = R"({"path":"a"})";
  written[3] = written[2];
  written[3].kind = Kind::kToolFinished;
  written[3].is_error = true;
  written[3].messages = {
      Message::ToolResult("call_1", "no such file", "read_file")};
  // Each durable point in its own transaction, or several together.
  recorder_->OnCheckpoints(review, {written[0]});
  recorder_->OnCheckpoints(review, {written[1], written[2]});
  recorder_->OnCheckpoints(review, {});
  recorder_->OnCheckpoints(review, {written[3]});

  Result<std::vector<agent::ConversationCheckpoint>> back =
      Result<std::vector<agent::ConversationCheckpoint>>(
          std::vector<agent::ConversationCheckpoint>{});
  ASSERT_TRUE(store_
                  ->Read([&](Db& db) -> Status {
                    back = ReadConversationLog(db, run_.id, "build:1");
                    return back.status();
                  })
                  .ok())
      << back.status().message();
  ASSERT_EQ(back->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    SCOPED_TRACE(i);
    const auto& w = written[i];
    const auto& r = (*back)[i];
    EXPECT_EQ(r.kind, w.kind);
    EXPECT_EQ(r.turn, w.turn);
    EXPECT_EQ(CheckpointJson(r), CheckpointJson(w));
    ASSERT_EQ(r.messages.size(), w.messages.size());
    for (size_t m = 0; m < w.messages.size(); ++m) {
      EXPECT_EQ(r.messages[m].role, w.messages[m].role);
      EXPECT_EQ(r.messages[m].content, w.messages[m].content);
      EXPECT_EQ(r.messages[m].tool_call_id, w.messages[m].tool_call_id);
      EXPECT_EQ(r.messages[m].tool_calls.size(),
                w.messages[m].tool_calls.size());
    }
  }
  EXPECT_EQ((*back)[1].messages[0].tool_calls[0].arguments, R"({"path":"a"})");
  EXPECT_EQ((*back)[1].usd, 0.1 + 0.2);
  EXPECT_TRUE((*back)[3].is_error);
  EXPECT_TRUE((*back)[0].nudge);
  EXPECT_FALSE((*back)[1].nudge);
}

// A row whose numbers and flags have the wrong types reads as zeros and
// false, never throws; a row that is not JSON is an error naming it.
TEST_F(RecorderTest, DamagedCheckpointsReadAsZerosOrErrors) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef review = Ref("1", "review", pipeline::StepKind::kAgent);
  recorder_->OnStepStart(review, std::nullopt);
  auto insert = [&](int seq, const std::string& text) {
    return store_->Write([&](Db& db) -> Status {
      Result<StatementUse> st = db.Prepared(
          "INSERT INTO conversation_log (run_id, step_id, seq, kind, turn,"
          " at_ms, checkpoint) VALUES (?1, 'build:1', ?2, 'answer', 1, 0,"
          " ?3)");
      if (!st.ok()) return st.status();
      (*st)->Bind(1, run_.id);
      (*st)->Bind(2, int64_t{seq});
      (*st)->Bind(3, text);
      return (*st)->Run();
    });
  };
  ASSERT_TRUE(insert(1, R"({"messages":[],"prompt_tokens":"x","usd":[1],)"
                        R"("provider_requests":1e300,"nudge":1,)"
                        R"("is_error":"yes","completion_tokens":2.5})")
                  .ok());
  auto read = [&] {
    Result<std::vector<agent::ConversationCheckpoint>> back =
        std::vector<agent::ConversationCheckpoint>{};
    EXPECT_TRUE(store_
                    ->Read([&](Db& db) -> Status {
                      back = ReadConversationLog(db, run_.id, "build:1");
                      return Status::Ok();
                    })
                    .ok());
    return back;
  };
  auto back = read();
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].prompt_tokens, 0);
  EXPECT_EQ((*back)[0].completion_tokens, 0);
  EXPECT_EQ((*back)[0].provider_requests, 0);
  EXPECT_EQ((*back)[0].usd, 0);
  EXPECT_FALSE((*back)[0].nudge);
  EXPECT_FALSE((*back)[0].is_error);

  ASSERT_TRUE(insert(2, "{not json").ok());
  back = read();
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("row 2"), std::string::npos)
      << back.status().message();
}

// A checkpoint's text is strict JSON whatever its messages hold: control
// characters, quotes, bytes that are not UTF-8 (read back as U+FFFD), a
// cost that is not a number (read back as zero), the largest counts.
TEST(CheckpointJsonTest, HostileContentStaysStrictJson) {
  using Kind = agent::ConversationCheckpoint::Kind;
  agent::ConversationCheckpoint cp;
  cp.kind = Kind::kAnswer;
  const std::string hostile("\x00\x01\x1f\x7f \"\\ \xff\xc0\xaf \xe2\x82", 14);
  cp.messages = {Message::Assistant(hostile, {{hostile, hostile, hostile}}),
                 Message::ToolResult(hostile, hostile, hostile)};
  cp.source = hostile;
  cp.prompt_tokens = INT64_MAX;
  cp.completion_tokens = INT64_MIN;
  cp.usd = std::nan("");
  const std::string text = CheckpointJson(cp);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  const std::string fffd = "\xEF\xBF\xBD";
  const std::string clean = std::string("\x00\x01\x1f\x7f \"\\ ", 8) + fffd +
                            fffd + fffd + " " + fffd;
  EXPECT_EQ(j["messages"][0]["content"], clean);
  EXPECT_EQ(j["messages"][0]["tool_calls"][0]["arguments"], clean);
  EXPECT_EQ(j["messages"][1]["tool_call_id"], clean);
  EXPECT_EQ(j["messages"][1]["tool_name"], clean);
  EXPECT_EQ(j["source"], clean);
  EXPECT_EQ(j["prompt_tokens"], INT64_MAX);
  EXPECT_EQ(j["completion_tokens"], INT64_MIN);
  EXPECT_TRUE(j["usd"].is_null());
}

TEST_F(RecorderTest, TotalTimeoutFieldsAreKept) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::AttemptRecord second = Attempt(2, 5, Outcome::kFailed, "timed out");
  second.clipped_to = Millis(397);
  second.exhausted_by = "total_timeout";
  second.timed_out = true;
  RunStep(Ref("1", "fetch"), {Attempt(1, 5, Outcome::kFailed), second},
          Outcome::kFailed,
          "STEP_RETRY_EXHAUSTED: Step 'fetch' failed after 2 attempts");
  Result<StoredRun> got = LoadRun(*store_, run_.id);
  ASSERT_TRUE(got.ok()) << got.status().message();
  nlohmann::json a = RunToJson(*got)["jobs"][0]["steps"][0]["attempts"][1];
  EXPECT_EQ(a["clipped_to_ms"], 397);
  EXPECT_EQ(a["exhausted_by"], "total_timeout");
  EXPECT_EQ(a["timed_out"], true);
  EXPECT_NE(FormatRun(*got).find(
                "STEP_RETRY_EXHAUSTED: Step 'fetch' failed after 2 attempts"),
            std::string::npos);
}

TEST_F(RecorderTest, AFixerThatRunsTwiceKeepsBothRuns) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef fix = Ref("1/fix", "fixer", pipeline::StepKind::kAgent);
  fix.fixer = true;
  RunStep(fix, {Attempt(1, 1, Outcome::kSucceeded)}, Outcome::kSucceeded);
  RunStep(fix, {Attempt(1, 1, Outcome::kFailed)}, Outcome::kFailed);
  Result<StoredRun> got = LoadRun(*store_, run_.id);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->jobs[0].steps.size(), 2u);
  EXPECT_EQ(got->jobs[0].steps[0].id, "build:1/fix");
  EXPECT_EQ(got->jobs[0].steps[1].id, "build:1/fix~2");
  EXPECT_EQ(got->jobs[0].steps[1].status, "failed");
}

TEST_F(RecorderTest, ManyThreadsRecordAtOnce) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  constexpr int kThreads = 8, kSteps = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int s = 0; s < kSteps; ++s) {
        std::string id = std::to_string(t) + "." + std::to_string(s);
        RunStep(Ref(id, "cell" + id),
                {Attempt(1, 2, Outcome::kFailed),
                 Attempt(2, 2, Outcome::kSucceeded)},
                Outcome::kSucceeded);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Count("SELECT count(*) FROM steps WHERE status = 'succeeded'"),
            kThreads * kSteps);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts"), 2 * kThreads * kSteps);
}

TEST_F(RecorderTest, ARunWhoseProcessIsGoneReadsAsInterrupted) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef ref = Ref("1", "slow");
  recorder_->OnStepStart(ref, std::nullopt);
  recorder_->OnAttemptStart(ref, 1, 1, std::nullopt);
  // This process is alive: the run is running.
  Result<StoredRun> live = LoadRun(*store_, run_.id);
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->status, "running");
  EXPECT_EQ(live->jobs[0].steps[0].status, "running");

  // A pid that no longer exists (a child that has been reaped).
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ASSERT_TRUE(store_
                  ->Write([&](Db& db) -> Status {
                    Result<StatementUse> st =
                        db.Prepared("UPDATE runs SET pid = ?1");
                    if (!st.ok()) return st.status();
                    (*st)->Bind(1, int64_t{child});
                    return (*st)->Run();
                  })
                  .ok());
  Result<StoredRun> dead = LoadRun(*store_, run_.id);
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->status, "interrupted");
  EXPECT_EQ(dead->jobs[0].status, "interrupted");
  EXPECT_EQ(dead->jobs[0].steps[0].status, "interrupted");
  EXPECT_EQ(dead->jobs[0].steps[0].attempts[0].status, "interrupted");
}

TEST(RunProcessAliveTest, PidStartTimeAndHostDecide) {
  TempDir dir;
  const int64_t self = getpid();
  const std::string start = ProcessStartTime(self);
  ASSERT_FALSE(start.empty());
  EXPECT_TRUE(RunProcessAlive(dir.path(), "r1", HostName(), self, start));
  // Same pid, another process (the pid was reused).
  EXPECT_FALSE(
      RunProcessAlive(dir.path(), "r1", HostName(), self, start + "0"));
}

// Another machine's process cannot be checked; its run's lock decides:
// held (a live run over a shared folder), free (a folder restored from a
// dead runner), or missing (cannot be told: alive).
TEST(RunProcessAliveTest, AnotherHostsRunIsAliveWhileItsLockIsHeld) {
  TempDir dir;
  const std::string elsewhere = HostName() + "-elsewhere";
  EXPECT_TRUE(RunProcessAlive(dir.path(), "r1", elsewhere, 1, "x"));
  {
    auto lock = RunLock::Acquire(dir.path(), "r1");
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    EXPECT_TRUE(RunProcessAlive(dir.path(), "r1", elsewhere, 1, "x"));
    // The lock file as a dead process leaves it: there, and free.
    std::filesystem::copy_file(RunLockPath(dir.path(), "r1"),
                               RunLockPath(dir.path(), "r2"));
  }
  EXPECT_FALSE(RunProcessAlive(dir.path(), "r2", elsewhere, 1, "x"));
}

TEST_F(RecorderTest, RunsAreFoundByIdOrUniquePrefix) {
  recorder_->OnRunStart(run_);
  pipeline::RunRecord other = run_;
  other.id = "20261130-070000-abff";
  RunRecorder(*store_).OnRunStart(other);
  EXPECT_TRUE(LoadRun(*store_, "20261130-070000-abc").ok());
  Result<StoredRun> ambiguous = LoadRun(*store_, "20261130-070000-ab");
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadRun(*store_, "nope").status().code(), StatusCode::kNotFound);
  Result<std::vector<StoredRun>> runs = ListRuns(*store_);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), 2u);
  EXPECT_EQ(ListRuns(*store_, 1)->size(), 1u);
}

TEST_F(RecorderTest, StepLogsKeepOutputAndLogLinesInOrderAndPage) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef task = Ref("1", "compile");
  pipeline::StepRef review = Ref("2", "review", pipeline::StepKind::kAgent);
  recorder_->OnStepStart(task, std::nullopt);
  recorder_->OnStepStart(review, std::nullopt);
  recorder_->OnOutput(task, OutputStream::kStdout, "compiling a.cc");
  recorder_->OnLog(review, "WRN agent.request_retry agent=review status=500");
  recorder_->OnOutput(task, OutputStream::kStderr, "warning: unused x");
  recorder_->OnOutput(task, OutputStream::kStdout, "done");

  // The run lists how many lines each step has, while it still runs.
  Result<StoredRun> run = LoadRun(*store_, "");
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->jobs.size(), 1u);
  ASSERT_EQ(run->jobs[0].steps.size(), 2u);
  for (const StoredStep& s : run->jobs[0].steps) {
    EXPECT_EQ(s.log_lines, s.name == "compile" ? 3 : 1) << s.name;
  }

  Result<StoredLog> all = LoadStepLog(*store_, "", "build:1", 0, 0);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->run_id, run_.id);
  EXPECT_EQ(all->last_seq, 3);
  ASSERT_EQ(all->lines.size(), 3u);
  EXPECT_EQ(all->lines[0].seq, 1);
  EXPECT_EQ(all->lines[0].stream, "stdout");
  EXPECT_EQ(all->lines[0].text, "compiling a.cc");
  EXPECT_EQ(all->lines[1].stream, "stderr");
  EXPECT_EQ(all->lines[2].text, "done");

  // Paging: after a line, at most `limit` lines.
  Result<StoredLog> page = LoadStepLog(*store_, "2026", "build:1", 1, 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->lines.size(), 1u);
  EXPECT_EQ(page->lines[0].seq, 2);
  EXPECT_EQ(page->last_seq, 3);
  EXPECT_TRUE(LoadStepLog(*store_, "", "build:1", 3, 0)->lines.empty());

  Result<StoredLog> agent = LoadStepLog(*store_, "", "build:2", 0, 0);
  ASSERT_TRUE(agent.ok());
  ASSERT_EQ(agent->lines.size(), 1u);
  EXPECT_EQ(agent->lines[0].stream, "log");

  // A step the run never had, and a run that is not there.
  Result<StoredLog> none = LoadStepLog(*store_, "", "build:9", 0, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(),
            "no step 'build:9' in run '" + run_.id + "'");
  EXPECT_EQ(LoadStepLog(*store_, "nope", "build:1", 0, 0).status().code(),
            StatusCode::kNotFound);
}

TEST_F(RecorderTest, OutputPastTheCapIsNotStored) {
  recorder_->OnRunStart(run_);
  recorder_->OnJobStart("build", std::nullopt);
  pipeline::StepRef task = Ref("1", "chatty");
  recorder_->OnStepStart(task, std::nullopt);
  for (int i = 0; i <= RunRecorder::kMaxOutputLines; ++i) {
    recorder_->OnOutput(task, OutputStream::kStdout, std::to_string(i));
  }
  Result<StoredLog> log = LoadStepLog(*store_, "", "build:1", 0, 0);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->last_seq, RunRecorder::kMaxOutputLines);
  EXPECT_EQ(log->lines.size(),
            static_cast<size_t>(RunRecorder::kMaxOutputLines));
}

}  // namespace
}  // namespace steps::store
