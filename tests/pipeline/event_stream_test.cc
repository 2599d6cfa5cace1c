// The event stream of a cell run elsewhere: what EventWriter writes, an
// EventReader turns back into the same observer calls, field for field;
// lines that do not read are refused and call nothing.
#include "pipeline/event_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/clock.h"
#include "process/output_capture.h"

namespace steps::pipeline {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Keeps every call it gets, as records.
class Recorder : public RunObserver {
 public:
  struct Call {
    std::string what;
    StepRef ref;
    std::optional<SteadyTime> deadline;
    int attempt = 0, of = 0;
    OutputStream stream = OutputStream::kStdout;
    std::string line;
    agent::AgentTurnRecord turn;
    AttemptRecord attempt_record;
    StepRecord step;
  };
  Call& Add(const char* what, const StepRef& s,
            std::optional<SteadyTime> d = std::nullopt) {
    Call& c = calls.emplace_back();
    c.what = what;
    c.ref = s;
    c.deadline = d;
    return c;
  }
  void OnStepStart(const StepRef& s, std::optional<SteadyTime> d) override {
    Add("step_start", s, d);
  }
  void OnAttemptStart(const StepRef& s, int a, int of,
                      std::optional<SteadyTime> d) override {
    Call& c = Add("attempt_start", s, d);
    c.attempt = a;
    c.of = of;
  }
  void OnOutput(const StepRef& s, OutputStream stream,
                std::string_view line) override {
    Call& c = Add("output", s);
    c.stream = stream;
    c.line = line;
  }
  void OnLog(const StepRef& s, std::string_view line) override {
    Call& c = Add("log", s);
    c.line = line;
  }
  void OnAgentTurn(const StepRef& s, const agent::AgentTurnRecord& t) override {
    Call& c = Add("turn", s);
    c.turn = t;
  }
  void OnAttemptEnd(const StepRef& s, const AttemptRecord& a) override {
    Call& c = Add("attempt_end", s);
    c.attempt_record = a;
  }
  void OnStepEnd(const StepRecord& s) override {
    Call& c = Add("step_end", s.ref);
    c.step = s;
  }
  std::vector<Call> calls;
};

// Every field away from its default, so that one the stream forgets shows.
StepRef FullRef() {
  StepRef r;
  r.id = "build:2.c3.1";
  r.job = "build";
  r.name = "review";
  r.kind = StepKind::kAgent;
  r.hook = HookKind::kOnFailure;
  r.fixer = true;
  r.judge = true;
  r.agent = "reviewer";
  r.line = 42;
  r.cell = "os=linux arch=arm";
  r.replayed = true;
  return r;
}

agent::AgentTurnRecord FullTurn() {
  agent::AgentTurnRecord t;
  t.turn = 3;
  t.provider_requests = 2;
  t.source = "mock/model";
  t.prompt_tokens = 1234567890123;
  t.completion_tokens = 77;
  t.usd = 0.125;
  agent::ToolCallRecord ran;
  ran.name = "read_file";
  ran.arguments = R"({"path":"a"})";
  ran.arguments_truncated = true;
  ran.result = "contents";
  ran.result_truncated = true;
  ran.result_bytes = 9000;
  ran.is_error = true;
  agent::ToolCallRecord never;
  never.name = "shell";
  t.tool_calls = {ran, never};
  t.text = "thinking";
  return t;
}

AttemptRecord FullAttempt() {
  AttemptRecord a;
  a.number = 2;
  a.of = 3;
  a.outcome = Outcome::kAborted;
  a.started = WallTime(1700000000123ms);
  a.duration = 4567ms;
  a.exit_code = -9;
  a.timed_out = true;
  a.clipped_to = 1500ms;
  a.exhausted_by = "total_timeout";
  a.error = "timed out";
  a.output = "partial\n";
  a.fixed = true;
  a.slurm = SlurmAttempt{"1234", "node7", 880ms};
  a.lost = true;
  a.identity = "abc123";
  a.assertions = {{"contains_all", false, "missing 'x'"}, {"judge", true, ""}};
  a.printed = {{OutputStream::kStderr, "warn"}, {OutputStream::kStdout, "ok"}};
  return a;
}

StepRecord FullStep() {
  StepRecord s;
  s.ref = FullRef();
  s.outcome = Outcome::kFailed;
  s.error = "assert failed";
  s.output = "answer";
  s.started = WallTime(1700000000001ms);
  s.duration = 99ms;
  s.identity = "feed";
  s.cached = true;
  s.cached_from_run = "r1";
  s.cached_from_step = "build:2";
  s.attempts = {FullAttempt()};
  agent::AgentResult a;
  a.outcome = Outcome::kFailed;
  a.answer = "answer";
  a.error = "budget";
  a.turns = 3;
  a.provider_requests = 5;
  a.retries = 2;
  a.retries_denied = 1;
  a.rate_waited = 250ms;
  a.prompt_tokens = 10;
  a.completion_tokens = 20;
  a.usd = 1.5;
  a.deadline_disclosed = true;
  a.nudge_sent = true;
  a.fallbacks_taken = {"b", "c"};
  a.turn_records = {FullTurn()};
  s.agent = a;
  GateVerdict g;
  g.how = GateVerdict::How::kDecided;
  g.decision = GateDecision::kApprove;
  g.by = "ann@host";
  g.via = "cli";
  g.reason = "fine";
  g.at = WallTime(1700000000999ms);
  s.gate = g;
  s.resumed = true;
  return s;
}

void ExpectSameRef(const StepRef& a, const StepRef& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.hook, b.hook);
  EXPECT_EQ(a.fixer, b.fixer);
  EXPECT_EQ(a.judge, b.judge);
  EXPECT_EQ(a.agent, b.agent);
  EXPECT_EQ(a.line, b.line);
  EXPECT_EQ(a.cell, b.cell);
  EXPECT_EQ(a.replayed, b.replayed);
}

void ExpectSameTurn(const agent::AgentTurnRecord& a,
                    const agent::AgentTurnRecord& b) {
  EXPECT_EQ(a.turn, b.turn);
  EXPECT_EQ(a.provider_requests, b.provider_requests);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.completion_tokens, b.completion_tokens);
  EXPECT_EQ(a.usd, b.usd);
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size());
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const auto& x = a.tool_calls[i];
    const auto& y = b.tool_calls[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.arguments, y.arguments);
    EXPECT_EQ(x.arguments_truncated, y.arguments_truncated);
    EXPECT_EQ(x.result, y.result);
    EXPECT_EQ(x.result_truncated, y.result_truncated);
    EXPECT_EQ(x.result_bytes, y.result_bytes);
    EXPECT_EQ(x.is_error, y.is_error);
  }
  EXPECT_EQ(a.text, b.text);
}

void ExpectSameAttempt(const AttemptRecord& a, const AttemptRecord& b) {
  EXPECT_EQ(a.number, b.number);
  EXPECT_EQ(a.of, b.of);
  EXPECT_EQ(a.outcome, b.outcome);
  EXPECT_EQ(a.started, b.started);
  EXPECT_EQ(a.duration, b.duration);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.timed_out, b.timed_out);
  EXPECT_EQ(a.clipped_to, b.clipped_to);
  EXPECT_EQ(a.exhausted_by, b.exhausted_by);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.fixed, b.fixed);
  ASSERT_EQ(a.slurm.has_value(), b.slurm.has_value());
  if (a.slurm) {
    EXPECT_EQ(a.slurm->job_id, b.slurm->job_id);
    EXPECT_EQ(a.slurm->node, b.slurm->node);
    EXPECT_EQ(a.slurm->queued, b.slurm->queued);
  }
  EXPECT_EQ(a.lost, b.lost);
  EXPECT_EQ(a.identity, b.identity);
  ASSERT_EQ(a.assertions.size(), b.assertions.size());
  for (size_t i = 0; i < a.assertions.size(); ++i) {
    EXPECT_EQ(a.assertions[i].name, b.assertions[i].name);
    EXPECT_EQ(a.assertions[i].passed, b.assertions[i].passed);
    EXPECT_EQ(a.assertions[i].detail, b.assertions[i].detail);
  }
  ASSERT_EQ(a.printed.size(), b.printed.size());
  for (size_t i = 0; i < a.printed.size(); ++i) {
    EXPECT_EQ(a.printed[i].stream, b.printed[i].stream);
    EXPECT_EQ(a.printed[i].text, b.printed[i].text);
  }
}

class EventStreamTest : public ::testing::Test {
 protected:
  EventStreamTest() { there_.Advance(3600s); }  // The clocks share no origin.

  // Writes with `write`, reads every line back into recorded_.
  template <typename Write>
  void RoundTrip(const Write& write) {
    std::vector<std::string> lines;
    EventWriter writer([&](std::string_view l) { lines.emplace_back(l); },
                       there_);
    write(writer);
    EventReader reader(recorded_, here_);
    for (const std::string& l : lines) {
      ASSERT_EQ(l.find('\n'), std::string::npos) << l;
      Status s = reader.Feed(l);
      ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << l;
    }
    end_ = reader.end();
  }

  FakeClock there_, here_;
  Recorder recorded_;
  std::optional<CellEnd> end_;
};

TEST_F(EventStreamTest, EveryEventComesBackFieldForField) {
  const StepRef ref = FullRef();
  const StepRecord step = FullStep();
  RoundTrip([&](EventWriter& w) {
    w.OnStepStart(ref, there_.Now() + 90s);
    w.OnAttemptStart(ref, 2, 3, std::nullopt);
    w.OnOutput(ref, OutputStream::kStderr, "a line\twith \"quotes\"");
    w.OnLog(ref, "WRN agent.request_retry attempt=2");
    w.OnAgentTurn(ref, FullTurn());
    w.OnAttemptEnd(ref, FullAttempt());
    w.OnStepEnd(step);
    w.WriteCellEnd({Outcome::kErrored, "a step errored", true});
  });
  const auto& c = recorded_.calls;
  ASSERT_EQ(c.size(), 7u);
  EXPECT_EQ(c[0].what, "step_start");
  ExpectSameRef(c[0].ref, ref);
  ASSERT_TRUE(c[0].deadline);
  EXPECT_EQ(*c[0].deadline, here_.Now() + 90s);  // Read on this clock.
  EXPECT_EQ(c[1].what, "attempt_start");
  EXPECT_EQ(c[1].attempt, 2);
  EXPECT_EQ(c[1].of, 3);
  EXPECT_FALSE(c[1].deadline);
  EXPECT_EQ(c[2].stream, OutputStream::kStderr);
  EXPECT_EQ(c[2].line, "a line\twith \"quotes\"");
  EXPECT_EQ(c[3].what, "log");
  EXPECT_EQ(c[3].line, "WRN agent.request_retry attempt=2");
  ExpectSameTurn(c[4].turn, FullTurn());
  ExpectSameAttempt(c[5].attempt_record, FullAttempt());
  for (size_t i = 1; i < 6; ++i) ExpectSameRef(c[i].ref, ref);

  const StepRecord& s = c[6].step;
  ExpectSameRef(s.ref, ref);
  EXPECT_EQ(s.outcome, step.outcome);
  EXPECT_EQ(s.error, step.error);
  EXPECT_EQ(s.output, step.output);
  EXPECT_EQ(s.started, step.started);
  EXPECT_EQ(s.duration, step.duration);
  EXPECT_EQ(s.identity, step.identity);
  EXPECT_EQ(s.cached, step.cached);
  EXPECT_EQ(s.cached_from_run, step.cached_from_run);
  EXPECT_EQ(s.cached_from_step, step.cached_from_step);
  ASSERT_EQ(s.attempts.size(), 1u);
  ExpectSameAttempt(s.attempts[0], step.attempts[0]);
  ASSERT_TRUE(s.agent);
  const agent::AgentResult& a = *s.agent;
  const agent::AgentResult& b = *step.agent;
  EXPECT_EQ(a.outcome, b.outcome);
  EXPECT_EQ(a.answer, b.answer);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.turns, b.turns);
  EXPECT_EQ(a.provider_requests, b.provider_requests);
  EXPECT_EQ(a.retries, b.retries);
  EXPECT_EQ(a.retries_denied, b.retries_denied);
  EXPECT_EQ(a.rate_waited, b.rate_waited);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.completion_tokens, b.completion_tokens);
  EXPECT_EQ(a.usd, b.usd);
  EXPECT_EQ(a.deadline_disclosed, b.deadline_disclosed);
  EXPECT_EQ(a.nudge_sent, b.nudge_sent);
  EXPECT_EQ(a.fallbacks_taken, b.fallbacks_taken);
  ASSERT_EQ(a.turn_records.size(), 1u);
  ExpectSameTurn(a.turn_records[0], b.turn_records[0]);
  ASSERT_TRUE(s.gate);
  EXPECT_EQ(s.gate->how, step.gate->how);
  EXPECT_EQ(s.gate->decision, step.gate->decision);
  EXPECT_EQ(s.gate->by, step.gate->by);
  EXPECT_EQ(s.gate->via, step.gate->via);
  EXPECT_EQ(s.gate->reason, step.gate->reason);
  EXPECT_EQ(s.gate->at, step.gate->at);
  EXPECT_EQ(s.resumed, step.resumed);

  ASSERT_TRUE(end_);
  EXPECT_EQ(end_->outcome, Outcome::kErrored);
  EXPECT_EQ(end_->error, "a step errored");
  EXPECT_TRUE(end_->caused_by_error);
}

TEST_F(EventStreamTest, DefaultsComeBackAsDefaults) {
  StepRef ref;
  ref.id = "j:1";
  StepRecord step;
  step.ref = ref;
  step.outcome = Outcome::kNotStarted;
  RoundTrip([&](EventWriter& w) {
    w.OnStepStart(ref, std::nullopt);
    w.OnStepEnd(step);
    w.WriteCellEnd({});
  });
  ASSERT_EQ(recorded_.calls.size(), 2u);
  const StepRecord& s = recorded_.calls[1].step;
  EXPECT_FALSE(s.ref.hook);
  EXPECT_FALSE(s.agent);
  EXPECT_FALSE(s.gate);
  EXPECT_TRUE(s.attempts.empty());
  EXPECT_EQ(s.outcome, Outcome::kNotStarted);
  ASSERT_TRUE(end_);
  EXPECT_EQ(end_->outcome, Outcome::kSucceeded);
}

// A deadline already passed travels as a negative time left.
TEST_F(EventStreamTest, APassedDeadlineStaysPassed) {
  StepRef ref;
  ref.id = "j:1";
  RoundTrip([&](EventWriter& w) { w.OnStepStart(ref, there_.Now() - 5s); });
  ASSERT_EQ(recorded_.calls.size(), 1u);
  EXPECT_EQ(*recorded_.calls[0].deadline, here_.Now() - 5s);
}

// Output that is not UTF-8 still makes one valid line (each bad byte
// becomes U+FFFD, as everywhere steps writes JSON).
TEST_F(EventStreamTest, OutputThatIsNotUtf8StillTravels) {
  StepRef ref;
  ref.id = "j:1";
  RoundTrip([&](EventWriter& w) {
    w.OnStepStart(ref, std::nullopt);
    w.OnOutput(ref, OutputStream::kStdout,
               "a\xff\xfe"
               "b\nc");
  });
  ASSERT_EQ(recorded_.calls.size(), 2u);
  EXPECT_EQ(recorded_.calls[1].line,
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\nc");
}

TEST_F(EventStreamTest, LinesThatDoNotReadAreRefusedAndCallNothing) {
  EventReader reader(recorded_, here_);
  ASSERT_TRUE(
      reader.Feed(R"({"e":"step_start","ref":{"id":"j:1","kind":"task"}})")
          .ok());
  recorded_.calls.clear();
  const std::pair<const char*, const char*> bad[] = {
      {"", "event line"},
      {"not json", "event line"},
      {"[1,2]", "expected an object"},
      {R"({"e":"explode"})", "'explode' is not an event"},
      {R"({"e":"output","step":"j:9","stream":"stdout","line":"x"})",
       "'j:9' has not started"},
      {R"({"e":"output","step":"j:1","stream":"stdin","line":"x"})",
       "neither stdout nor stderr"},
      {R"({"e":"output","step":"j:1","stream":"stdout","line":7})",
       "line is not a string"},
      {R"({"e":"turn","step":"j:1","turn":{"turn":1,"prompt_tokens":-5}})",
       "prompt_tokens is out of range"},
      {R"({"e":"turn","step":"j:1","turn":{"turn":1,"usd":-1}})",
       "usd is out of range"},
      {R"({"e":"turn","step":"j:1","turn":{"turn":1,"prompt_tokens":1e300}})",
       "not a whole number"},
      {R"({"e":"turn","step":"j:1","turn":{"turn":99999999999}})",
       "turn is out of range"},
      {R"({"e":"attempt_start","step":"j:1","attempt":0})",
       "attempt is out of range"},
      {R"({"e":"attempt_start","step":"j:1","deadline_in_ms":18446744073709551615})",
       "deadline_in_ms is out of range"},
      {R"({"e":"attempt_end","step":"j:1","attempt":{"outcome":"great"}})",
       "outcome is not an outcome"},
      {R"({"e":"step_end","record":{"ref":{"id":"j:1","kind":"wish"},"outcome":"succeeded"}})",
       "not a step kind"},
      {R"({"e":"step_start","ref":{"kind":"task"}})", "id is missing"},
      {R"({"e":"cell_end","outcome":"succeeded","error":["x"]})",
       "error is not a string"},
  };
  for (const auto& [line, why] : bad) {
    Status s = reader.Feed(line);
    EXPECT_FALSE(s.ok()) << line;
    EXPECT_THAT(s.message(), HasSubstr(why)) << line;
  }
  std::string deep(10000, '[');
  EXPECT_THAT(reader.Feed(deep).message(), HasSubstr("nested too deeply"));
  EXPECT_TRUE(recorded_.calls.empty());
  EXPECT_FALSE(reader.end());
  // The step is still known: a good line after bad ones reads.
  EXPECT_TRUE(reader.Feed(R"({"e":"log","step":"j:1","line":"fine"})").ok());
  EXPECT_EQ(recorded_.calls.size(), 1u);
}

TEST_F(EventStreamTest, NothingReadsAfterTheCellsEnd) {
  EventReader reader(recorded_, here_);
  ASSERT_TRUE(reader.Feed(R"({"e":"cell_end","outcome":"failed"})").ok());
  ASSERT_TRUE(reader.end());
  EXPECT_EQ(reader.end()->outcome, Outcome::kFailed);
  Status s = reader.Feed(R"({"e":"cell_end","outcome":"succeeded"})");
  EXPECT_THAT(s.message(), HasSubstr("after the cell's end"));
  EXPECT_EQ(reader.end()->outcome, Outcome::kFailed);
}

// Lines longer than a LineCallback's pieces come back whole, whatever
// their length (a line of exactly the piece size included).
TEST_F(EventStreamTest, LongLinesComeBackWholeFromPieces) {
  StepRef ref;
  ref.id = "j:1";
  const size_t piece = ProcessRequest::kMaxLineBytes;
  std::vector<std::string> sent;
  for (size_t n : {piece - 200, piece - 60, piece - 1, piece, piece + 1,
                   2 * piece - 60, 2 * piece, 5 * piece + 3}) {
    for (size_t d = 0; d < 60; ++d) sent.push_back(std::string(n - d, 'x'));
  }
  std::string stream;
  EventWriter writer(
      [&](std::string_view l) { stream += std::string(l) + "\n"; }, there_);
  writer.OnStepStart(ref, std::nullopt);
  for (const std::string& line : sent)
    writer.OnOutput(ref, OutputStream::kStdout, line);
  EventReader reader(recorded_, here_);
  LineSplitter split(piece, [&](std::string_view p) {
    Status s = reader.FeedPiece(p);
    ASSERT_TRUE(s.ok()) << s.message();
  });
  split.Feed(stream);
  split.Flush();
  ASSERT_EQ(recorded_.calls.size(), sent.size() + 1);
  for (size_t i = 0; i < sent.size(); ++i)
    ASSERT_EQ(recorded_.calls[i + 1].line, sent[i]) << i;
}

TEST(CellTaskJsonTest, ACellTaskComesBackAndABadOneIsRefused) {
  CellTask t;
  t.job = "j";
  t.path = {2, 0, 1};
  t.block_id = "3.1.2";
  t.cell = 7;
  t.outer_cell = "os=linux";
  t.outer_vars = {{"os", "linux"}};
  t.job_deadline = WallTime(1800000000123ms);
  t.job_tokens_spent = 1234;
  t.job_usd_spent = 0.5;
  t.sent = WallTime(1800000000001ms);
  t.finished = {FullStep()};
  Result<CellTask> back = CellTaskFromJson(CellTaskToJson(t));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job, t.job);
  EXPECT_EQ(back->path, t.path);
  EXPECT_EQ(back->block_id, t.block_id);
  EXPECT_EQ(back->cell, t.cell);
  EXPECT_EQ(back->outer_cell, t.outer_cell);
  EXPECT_EQ(back->outer_vars, t.outer_vars);
  EXPECT_EQ(back->job_deadline, t.job_deadline);
  EXPECT_EQ(back->job_tokens_spent, t.job_tokens_spent);
  EXPECT_EQ(back->job_usd_spent, t.job_usd_spent);
  EXPECT_EQ(back->sent, t.sent);
  ASSERT_EQ(back->finished.size(), 1u);
  EXPECT_EQ(back->finished[0].ref.id, FullStep().ref.id);
  EXPECT_EQ(back->finished[0].output, FullStep().output);
  t.job_deadline.reset();
  back = CellTaskFromJson(CellTaskToJson(t));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->job_deadline);

  for (const char* bad :
       {R"({"path":[0]})", R"({"job":"j"})", R"({"job":"j","path":[-1]})",
        R"({"job":"j","path":[0],"cell":-1})",
        R"({"job":"j","path":[0],"outer_vars":[1]})",
        R"({"job":"j","path":[0],"job_usd_spent":-2})", "[]"}) {
    Result<CellTask> r = CellTaskFromJson(nlohmann::json::parse(bad));
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("cell task")) << bad;
  }
}

}  // namespace
}  // namespace steps::pipeline
