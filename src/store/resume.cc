#include "store/resume.h"

#include <sstream>
#include <vector>

#include "agent/resume.h"
#include "store/conversation_log.h"
#include "store/reader.h"
#include "store/recorder.h"

namespace steps::store {

namespace {

WallTime FromMs(int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }

bool Resumable(const std::string& status) {
  return status == "interrupted" || status == "aborted";
}

bool Ended(const std::string& status) {
  return status == "succeeded" || status == "failed" || status == "errored";
}

// The run asked for, or the newest resumable one (of `file` when set).
Result<std::string> PickRun(Store& store, const std::string& id,
                            const std::string& file) {
  if (!id.empty()) return id;
  Result<std::vector<StoredRun>> runs = ListRuns(store);
  if (!runs.ok()) return runs.status();
  for (const StoredRun& r : *runs) {
    if (!file.empty() && r.file != file) continue;
    if (Resumable(r.status)) return r.id;
  }
  return NotFound(file.empty() ? "no interrupted or aborted run to resume"
                               : "no interrupted or aborted run of " + file);
}

// The latest time the run's records hold: when it died.
Result<int64_t> DiedMs(Db& db, const std::string& run_id) {
  Result<StatementUse> st = db.Prepared(
      "SELECT max(t) FROM ("
      " SELECT max(started_ms + coalesce(duration_ms, 0)) AS t FROM steps"
      "  WHERE run_id = ?1"
      " UNION ALL SELECT max(started_ms + coalesce(duration_ms, 0)) FROM"
      "  attempts WHERE run_id = ?1"
      " UNION ALL SELECT max(started_ms + coalesce(duration_ms, 0)) FROM jobs"
      "  WHERE run_id = ?1"
      " UNION ALL SELECT max(at_ms) FROM conversation_log WHERE run_id = ?1"
      " UNION ALL SELECT max(at_ms) FROM agent_turns WHERE run_id = ?1"
      " UNION ALL SELECT max(resumed_ms) FROM run_interruptions"
      "  WHERE run_id = ?1"
      " UNION ALL SELECT started_ms FROM runs WHERE id = ?1"
      " UNION ALL SELECT alive_ms FROM runs WHERE id = ?1)");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, run_id);
  Result<bool> row = (*st)->Step();
  if (!row.ok()) return row.status();
  return *row ? (*st)->Int(0) : int64_t{0};
}

// Milliseconds the run was alive between `from_ms` and `died_ms`: the
// downtime of earlier interruptions is not counted.
Millis AliveSince(int64_t from_ms, int64_t died_ms,
                  const std::vector<StoredInterruption>& earlier) {
  int64_t alive = died_ms - from_ms;
  for (const StoredInterruption& i : earlier) {
    if (i.died_ms >= from_ms) alive -= i.resumed_ms - i.died_ms;
  }
  return Millis(std::max<int64_t>(alive, 0));
}

// The agent totals of a step row (columns 11..15), when it has them.
std::optional<agent::AgentResult> StepAgent(const Statement& s,
                                            Outcome outcome) {
  if (s.IsNull(11)) return std::nullopt;
  agent::AgentResult a;
  a.outcome = outcome;
  a.turns = static_cast<int>(s.Int(11));
  a.provider_requests = static_cast<int>(s.Int(12));
  a.prompt_tokens = s.Int(13);
  a.completion_tokens = s.Int(14);
  a.usd = s.Real(15);
  return a;
}

// A finished step's row as the record the executor replays.
pipeline::StepRecord FinishedRecord(const Statement& s, Outcome outcome) {
  pipeline::StepRecord rec;
  rec.ref.id = s.Text(0);
  rec.outcome = outcome;
  rec.error = s.Text(4);
  rec.output = s.Text(5);
  rec.started = FromMs(s.Int(2));
  rec.duration = Millis(s.IsNull(3) ? 0 : s.Int(3));
  rec.identity = s.Text(6);
  rec.cached = s.Int(7) != 0;
  rec.agent = StepAgent(s, outcome);
  if (rec.agent) rec.agent->answer = rec.output;
  return rec;
}

// Sorts the run's steps into finished (replayed) and in flight (rerun with
// their start kept). A step that started after the run was aborted (a hook
// run because of the abort, on_abort or ensure) runs again: the resumed
// run decides anew whether it fires.
Status ReadSteps(Db& db, ResumePoint& point,
                 const std::vector<StoredInterruption>& earlier,
                 std::vector<std::string>& in_flight) {
  Result<StatementUse> st = db.Prepared(
      "SELECT step_id, status, started_ms, duration_ms, error, output,"
      " identity, cached, start_seq, end_seq,"
      " (SELECT min(end_seq) FROM steps a WHERE a.run_id = ?1 AND"
      "   a.status IN ('aborted', 'not started')),"
      " agent_turns, provider_requests, prompt_tokens, completion_tokens, usd"
      " FROM steps WHERE run_id = ?1 AND instr(step_id, '~') = 0");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, point.run_id);
  return (*st)->EachRow([&](const Statement& s) {
    const std::string id = s.Text(0);
    const std::string status = s.Text(1);
    const bool after_abort = !s.IsNull(10) && s.Int(8) > s.Int(10);
    // Neither done nor in flight: no attempt of it is carried over (a
    // succeeded one would end it unrun), it starts anew if it fires.
    if (after_abort) return;
    std::optional<Outcome> outcome = ParseOutcome(status);
    if (Ended(status) && outcome) {
      point.state.finished[id] = FinishedRecord(s, *outcome);
      return;
    }
    if (status == "not started") return;
    in_flight.push_back(id);
    point.state.step_started[id] = FromMs(s.Int(2));
    point.state.step_spent[id] = AliveSince(s.Int(2), point.died_ms, earlier);
  });
}

// The attempts of each step in flight that ended before it was
// interrupted: 1, 2, ... up to the first that did not fail or error, and a
// succeeded one after them.
Status ReadAttempts(Db& db, ResumePoint& point,
                    const std::vector<std::string>& in_flight) {
  Result<StatementUse> st = db.Prepared(
      "SELECT number, of, status, started_ms, duration_ms, exit_code,"
      " timed_out, error, output, fixed FROM attempts WHERE run_id = ?1 AND"
      " step_id = ?2 ORDER BY number");
  if (!st.ok()) return st.status();
  for (const std::string& id : in_flight) {
    (*st)->Reset();
    (*st)->Bind(1, point.run_id);
    (*st)->Bind(2, id);
    std::vector<pipeline::AttemptRecord> ended;
    bool gap = false;
    Status s = (*st)->EachRow([&](const Statement& row) {
      const std::string status = row.Text(2);
      if (gap || row.Int(0) != static_cast<int64_t>(ended.size()) + 1 ||
          (status != "failed" && status != "errored" &&
           status != "succeeded")) {
        gap = true;
        return;
      }
      // A succeeded attempt is the step's last: the step ended with it,
      // only its own end was not stored.
      gap = status == "succeeded";
      pipeline::AttemptRecord& a = ended.emplace_back();
      a.number = static_cast<int>(row.Int(0));
      a.of = static_cast<int>(row.Int(1));
      a.outcome = *ParseOutcome(status);
      a.started = FromMs(row.Int(3));
      a.duration = Millis(row.IsNull(4) ? 0 : row.Int(4));
      if (!row.IsNull(5)) a.exit_code = static_cast<int>(row.Int(5));
      a.timed_out = row.Int(6) != 0;
      a.error = row.Text(7);
      a.output = row.Text(8);
      a.fixed = row.Int(9) != 0;
    });
    if (!s.ok()) return s;
    if (!ended.empty()) point.state.attempts[id] = std::move(ended);
  }
  return Status::Ok();
}

// The conversations of the steps in flight that had one.
Status ReadConversations(Db& db, ResumePoint& point,
                         const std::vector<std::string>& in_flight) {
  for (const std::string& id : in_flight) {
    Result<std::vector<agent::ConversationCheckpoint>> log =
        ReadConversationLog(db, point.run_id, id);
    if (!log.ok()) return log.status();
    if (log->empty()) continue;
    point.state.conversations[id] = agent::RebuildConversation(*log);
  }
  return Status::Ok();
}

// What each step of `in_flight` had spent by its stored turns.
Status ReadInFlightSpent(Db& db, ResumePoint& point,
                         const std::vector<std::string>& in_flight) {
  Result<StatementUse> st = db.Prepared(
      "SELECT count(*), coalesce(sum(prompt_tokens + completion_tokens), 0),"
      " coalesce(sum(usd), 0) FROM agent_turns WHERE run_id = ?1 AND"
      " step_id = ?2");
  if (!st.ok()) return st.status();
  for (const std::string& id : in_flight) {
    (*st)->Reset();
    (*st)->Bind(1, point.run_id);
    (*st)->Bind(2, id);
    Result<bool> row = (*st)->Step();
    if (!row.ok()) return row.status();
    if (!*row || (*st)->Int(0) == 0) continue;
    point.state.in_flight_spent[id] = {(*st)->Int(1), (*st)->Real(2)};
  }
  return Status::Ok();
}

// The columns FinishedRecord reads, for the step rows a query picks.
constexpr const char* kStepColumns =
    "SELECT step_id, status, started_ms, duration_ms, error, output,"
    " identity, cached, start_seq, end_seq, NULL, agent_turns,"
    " provider_requests, prompt_tokens, completion_tokens, usd FROM steps";

// The fix agents' runs of each of `tasks` (TASK/fix, then TASK/fix~2, ...
// as the recorder names them), in the order they started.
Status ReadFixers(Db& db, ResumePoint& point,
                  const std::vector<StoredInterruption>& earlier,
                  const std::vector<std::string>& tasks) {
  Result<StatementUse> st = db.Prepared(
      std::string(kStepColumns) +
      " WHERE run_id = ?1 AND fixer = 1 AND (step_id = ?2 OR"
      " substr(step_id, 1, length(?2) + 1) = ?2 || '~') ORDER BY start_seq");
  if (!st.ok()) return st.status();
  for (const std::string& task : tasks) {
    (*st)->Reset();
    (*st)->Bind(1, point.run_id);
    (*st)->Bind(2, task + "/fix");
    std::vector<pipeline::ResumedFixer> runs;
    std::vector<std::string> unfinished;
    Status s = (*st)->EachRow([&](const Statement& row) {
      pipeline::ResumedFixer& f = runs.emplace_back();
      f.started = FromMs(row.Int(2));
      f.spent = AliveSince(row.Int(2), point.died_ms, earlier);
      std::optional<Outcome> outcome = ParseOutcome(row.Text(1));
      if (Ended(row.Text(1)) && outcome)
        f.finished = FinishedRecord(row, *outcome);
      else
        unfinished.push_back(row.Text(0));
    });
    if (!s.ok()) return s;
    if (runs.empty()) continue;
    // Each run that had not ended continues its stored conversation.
    size_t u = 0;
    for (pipeline::ResumedFixer& f : runs) {
      if (f.finished) continue;
      Result<std::vector<agent::ConversationCheckpoint>> log =
          ReadConversationLog(db, point.run_id, unfinished[u++]);
      if (!log.ok()) return log.status();
      if (!log->empty()) f.conversation = agent::RebuildConversation(*log);
    }
    point.state.fixers[task] = std::move(runs);
  }
  return Status::Ok();
}

Status ReadJobs(Db& db, ResumePoint& point,
                const std::vector<StoredInterruption>& earlier) {
  Result<StatementUse> st =
      db.Prepared("SELECT name, started_ms FROM jobs WHERE run_id = ?1");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, point.run_id);
  return (*st)->EachRow([&](const Statement& s) {
    const std::string name = s.Text(0);
    point.state.job_started[name] = FromMs(s.Int(1));
    point.state.job_spent[name] = AliveSince(s.Int(1), point.died_ms, earlier);
  });
}

Status ReadRunRow(Db& db, ResumePoint& point) {
  Result<StatementUse> st = db.Prepared(
      "SELECT file, file_hash, coalesce(file_text, ''), started_ms FROM runs"
      " WHERE id = ?1");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, point.run_id);
  Result<bool> row = (*st)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("no run " + point.run_id);
  point.file = (*st)->Text(0);
  point.file_hash = (*st)->Text(1);
  point.file_text = (*st)->Text(2);
  point.state.run_started = FromMs((*st)->Int(3));
  return Status::Ok();
}

}  // namespace

namespace {

// The run PickResumableRun picks, as stored.
Result<StoredRun> ResumableRun(Store& store, const std::string& id,
                               const std::string& file) {
  Result<std::string> picked = PickRun(store, id, file);
  if (!picked.ok()) return picked.status();
  Result<StoredRun> run = LoadRun(store, *picked);
  if (!run.ok()) return run.status();
  // A run still `running` on another host cannot be checked: named, it is
  // taken as interrupted (its state folder was restored here).
  if (!id.empty() && run->status == "running" && run->host != HostName())
    run->status = "interrupted";
  if (!Resumable(run->status)) {
    return InvalidArgument("run " + run->id + " is " + run->status +
                           "; only an interrupted or aborted run resumes");
  }
  return run;
}

}  // namespace

Result<std::string> PickResumableRun(Store& store, const std::string& id,
                                     const std::string& file) {
  Result<StoredRun> run = ResumableRun(store, id, file);
  if (!run.ok()) return run.status();
  return run->id;
}

Result<ResumePoint> LoadResumePoint(Store& store, const std::string& id,
                                    const std::string& file,
                                    bool fresh_deadlines) {
  Result<StoredRun> run = ResumableRun(store, id, file);
  if (!run.ok()) return run.status();
  ResumePoint point;
  point.run_id = run->id;
  point.status = run->status;
  for (const PlannedJob& job : run->plan) point.jobs.push_back(job.name);
  const std::vector<StoredInterruption>& earlier = run->interruptions;
  Status s = store.Read([&](Db& db) -> Status {
    if (Status r = ReadRunRow(db, point); !r.ok()) return r;
    Result<int64_t> died = DiedMs(db, point.run_id);
    if (!died.ok()) return died.status();
    point.died_ms = *died;
    std::vector<std::string> in_flight;
    if (Status r = ReadSteps(db, point, earlier, in_flight); !r.ok()) return r;
    if (Status r = ReadAttempts(db, point, in_flight); !r.ok()) return r;
    if (Status r = ReadConversations(db, point, in_flight); !r.ok()) return r;
    if (Status r = ReadInFlightSpent(db, point, in_flight); !r.ok()) return r;
    // The fixers of the tasks that ended, too: they are replayed with them.
    std::vector<std::string> tasks = in_flight;
    for (const auto& [id, rec] : point.state.finished) tasks.push_back(id);
    if (Status r = ReadFixers(db, point, earlier, tasks); !r.ok()) return r;
    return ReadJobs(db, point, earlier);
  });
  if (!s.ok()) return s;
  if (point.file_hash.empty()) {
    return InvalidArgument("run " + point.run_id +
                           " was recorded before steps kept the pipeline "
                           "file of a run; it cannot be resumed");
  }
  if (fresh_deadlines) {
    point.state.job_spent.clear();
    point.state.step_spent.clear();
    for (auto& [task, runs] : point.state.fixers) {
      for (pipeline::ResumedFixer& f : runs) f.spent = Millis(0);
    }
  }
  return point;
}

std::string DescribeFileChange(const ResumePoint& point,
                               const std::string& text) {
  if (text == point.file_text) return "";
  std::istringstream was(point.file_text), now(text);
  std::string a, b;
  for (int line = 1;; ++line) {
    const bool more_was = static_cast<bool>(std::getline(was, a));
    const bool more_now = static_cast<bool>(std::getline(now, b));
    if (!more_was && !more_now) break;
    if (more_was && more_now && a == b) continue;
    std::string what = point.file + ":" + std::to_string(line) + ": ";
    if (!more_was) return what + "added `" + b + "`";
    if (!more_now) return what + "removed `" + a + "`";
    return what + "was `" + a + "`, now `" + b + "`";
  }
  return point.file + ": the line endings or the last newline changed";
}

}  // namespace steps::store
