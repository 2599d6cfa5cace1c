#include "store/reader.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "store/recorder.h"
#include "store/run_lock.h"

namespace steps::store {

namespace {

std::vector<std::string> JsonStrings(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// A turn's tool_calls column: objects (see the recorder), or from older
// stores "NAME ARGUMENTS" strings cut at 300 bytes with "...".
std::vector<agent::ToolCallRecord> ToolCalls(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<agent::ToolCallRecord> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    agent::ToolCallRecord c;
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      const size_t space = s.find(' ');
      c.name = s.substr(0, space);
      if (space != std::string::npos) c.arguments = s.substr(space + 1);
      c.arguments_truncated =
          s.size() > 300 && s.compare(s.size() - 3, 3, "...") == 0;
    } else if (v.is_object()) {
      c.name = v.value("name", "");
      c.arguments = v.value("arguments", "");
      c.arguments_truncated = v.value("arguments_truncated", false);
      if (v.contains("result") && v["result"].is_string())
        c.result = v["result"].get<std::string>();
      c.result_truncated = v.value("result_truncated", false);
      c.result_bytes = v.value("result_bytes", int64_t{0});
      c.is_error = v.value("is_error", false);
    } else {
      continue;
    }
    out.push_back(std::move(c));
  }
  return out;
}

// The sum over a run's steps of `col` (a spend: tokens, usd), each step
// counted by its totals once it ended, else by its turns so far. Cached
// steps spent nothing. NULL when no step has any.
std::string RunSpend(const std::string& col) {
  return "(SELECT SUM(COALESCE(s." + col + ", (SELECT SUM(t." + col +
         ") FROM agent_turns t WHERE t.run_id = s.run_id AND t.step_id ="
         " s.step_id))) FROM steps s WHERE s.run_id = runs.id AND"
         " s.cached = 0)";
}

// Columns 0-8 of a run's row, then 9 its prompt tokens, 10 its completion
// tokens and 11 its usd.
const std::string& RunColumns() {
  static const std::string kColumns =
      "SELECT id, file, status, started_ms, duration_ms, taken_by, host, pid,"
      " pid_start, " +
      RunSpend("prompt_tokens") + ", " + RunSpend("completion_tokens") + ", " +
      RunSpend("usd") + " FROM runs";
  return kColumns;
}

// The state folder a store lives in (its runs' lock files are there).
std::string StateDirOf(const Store& store) {
  return std::filesystem::path(store.path()).parent_path().string();
}

StoredRun ReadRunRow(const Statement& s, const std::string& state_dir) {
  StoredRun r;
  r.id = s.Text(0);
  r.file = s.Text(1);
  r.status = s.Text(2);
  r.started_ms = s.Int(3);
  r.duration_ms = s.OptionalInt(4);
  r.taken_by = s.Text(5);
  r.host = s.Text(6);
  r.pid = s.Int(7);
  r.prompt_tokens = s.OptionalInt(9).value_or(0);
  r.completion_tokens = s.OptionalInt(10).value_or(0);
  if (!s.IsNull(11)) r.usd = s.Real(11);
  if (r.status == "running" &&
      !RunProcessAlive(state_dir, r.id, r.host, r.pid, s.Text(8)))
    r.status = "interrupted";
  return r;
}

// "running" in an interrupted run means the run stopped under it.
std::string Settle(std::string status, const StoredRun& run) {
  if (status == "running" && run.status == "interrupted") return "interrupted";
  return status;
}

// Runs `sql` with `run_id` bound to ?1, calling `row` on each result row.
Status ForRunRows(Db& db, const std::string& sql, const std::string& run_id,
                  const std::function<void(const Statement&)>& row) {
  Result<StatementUse> st = db.Prepared(sql);
  if (!st.ok()) return st.status();
  (*st)->Bind(1, run_id);
  return (*st)->EachRow(row);
}

Status LoadAttempts(Db& db, const StoredRun& run,
                    std::map<std::string, std::vector<StoredAttempt>>& out) {
  return ForRunRows(
      db,
      "SELECT step_id, number, of, status, started_ms, duration_ms,"
      " deadline_ms, identity, exit_code, timed_out, clipped_to_ms,"
      " exhausted_by, error, output, fixed, taken_by, slurm_job, queued_ms"
      " FROM attempts"
      " WHERE run_id = ?1 ORDER BY step_id, number",
      run.id, [&](const Statement& s) {
        StoredAttempt a;
        a.number = static_cast<int>(s.Int(1));
        a.of = static_cast<int>(s.Int(2));
        a.status = Settle(s.Text(3), run);
        a.started_ms = s.Int(4);
        a.duration_ms = s.OptionalInt(5);
        a.deadline_ms = s.OptionalInt(6);
        a.identity = s.Text(7);
        a.exit_code = s.OptionalInt(8);
        a.timed_out = s.Int(9) != 0;
        a.clipped_to_ms = s.OptionalInt(10);
        a.exhausted_by = s.Text(11);
        a.error = s.Text(12);
        a.output = s.Text(13);
        a.fixed = s.Int(14) != 0;
        a.taken_by = s.Text(15);
        if (!s.IsNull(16)) a.slurm_job = s.Text(16);
        a.queued_ms = s.OptionalInt(17);
        out[s.Text(0)].push_back(std::move(a));
      });
}

Status LoadTurns(Db& db, const std::string& run_id,
                 std::map<std::string, std::vector<StoredTurn>>& out) {
  return ForRunRows(
      db,
      "SELECT step_id, turn, provider_requests, source, prompt_tokens,"
      " completion_tokens, usd, tool_calls, text, at_ms FROM agent_turns"
      " WHERE run_id = ?1 ORDER BY step_id, turn",
      run_id, [&](const Statement& s) {
        StoredTurn t;
        t.turn = static_cast<int>(s.Int(1));
        t.provider_requests = static_cast<int>(s.Int(2));
        t.source = s.Text(3);
        t.prompt_tokens = s.Int(4);
        t.completion_tokens = s.Int(5);
        t.usd = s.Real(6);
        t.tool_calls = ToolCalls(s.Text(7));
        t.text = s.Text(8);
        t.at_ms = s.OptionalInt(9);
        out[s.Text(0)].push_back(std::move(t));
      });
}

Status LoadLineCounts(Db& db, const std::string& run_id,
                      std::map<std::string, int64_t>& out) {
  return ForRunRows(
      db,
      "SELECT step_id, MAX(seq) FROM output_lines WHERE run_id = ?1"
      " GROUP BY step_id",
      run_id, [&](const Statement& s) { out[s.Text(0)] = s.Int(1); });
}

Status LoadPlan(Db& db, StoredRun& run) {
  return ForRunRows(db, "SELECT plan FROM runs WHERE id = ?1", run.id,
                    [&](const Statement& s) {
                      run.plan = OutlineFromJson(
                          nlohmann::json::parse(s.Text(0), nullptr, false));
                    });
}

Status LoadSteps(Db& db, StoredRun& run) {
  std::map<std::string, std::vector<StoredAttempt>> attempts;
  std::map<std::string, std::vector<StoredTurn>> turns;
  std::map<std::string, int64_t> lines;
  if (Status s = LoadAttempts(db, run, attempts); !s.ok()) return s;
  if (Status s = LoadTurns(db, run.id, turns); !s.ok()) return s;
  if (Status s = LoadLineCounts(db, run.id, lines); !s.ok()) return s;
  std::map<std::string, GateRow> gates;
  {
    Result<std::vector<GateRow>> rows = ReadGates(db, run.id);
    if (!rows.ok()) return rows.status();
    for (GateRow& g : *rows) gates[g.step_id] = std::move(g);
  }
  std::map<std::string, StoredJob*> jobs;
  for (StoredJob& j : run.jobs) jobs[j.name] = &j;
  return ForRunRows(
      db,
      "SELECT s.step_id, s.job, s.name, s.kind, s.hook, s.fixer, s.line,"
      " s.status, s.error, s.output, s.started_ms, s.duration_ms,"
      " s.deadline_ms, s.identity, s.cached, s.agent_turns,"
      " s.provider_requests, s.prompt_tokens, s.completion_tokens, s.usd,"
      " s.nudge_sent, s.deadline_disclosed, s.fallbacks_taken,"
      " COALESCE(s.cached_from_run, c.run_id),"
      " COALESCE(s.cached_from_step, c.step_id), s.nudge_ms, s.cell,"
      " s.retries, s.retries_denied, s.rate_wait_ms"
      " FROM steps s"
      // A step recorded before steps kept its origin: the entry under its
      // key, when it is still there, is the best guess.
      " LEFT JOIN cache c ON s.cached = 1 AND s.cached_from_run IS NULL AND"
      " c.key = s.identity AND c.run_id != s.run_id WHERE s.run_id = ?1"
      " ORDER BY s.end_seq IS NULL, s.end_seq, s.start_seq",
      run.id, [&](const Statement& s) {
        StoredStep step;
        step.id = s.Text(0);
        step.job = s.Text(1);
        step.name = s.Text(2);
        step.kind = s.Text(3);
        step.hook = s.Text(4);
        step.fixer = s.Int(5) != 0;
        step.judge = step.id.size() > 6 &&
                     step.id.compare(step.id.size() - 6, 6, "/judge") == 0;
        step.line = static_cast<int>(s.Int(6));
        step.status = Settle(s.Text(7), run);
        step.error = s.Text(8);
        step.output = s.Text(9);
        step.started_ms = s.Int(10);
        step.duration_ms = s.OptionalInt(11);
        step.deadline_ms = s.OptionalInt(12);
        step.identity = s.Text(13);
        step.cached = s.Int(14) != 0;
        if (!s.IsNull(15)) {
          StoredAgent a;
          a.turns = static_cast<int>(s.Int(15));
          a.provider_requests = static_cast<int>(s.Int(16));
          a.prompt_tokens = s.Int(17);
          a.completion_tokens = s.Int(18);
          a.usd = s.Real(19);
          a.nudge_sent = s.Int(20) != 0;
          a.deadline_disclosed = s.Int(21) != 0;
          a.fallbacks_taken = JsonStrings(s.Text(22));
          // Recorded before these were kept: none known.
          a.retries = static_cast<int>(s.OptionalInt(27).value_or(0));
          a.retries_denied = static_cast<int>(s.OptionalInt(28).value_or(0));
          a.rate_wait_ms = s.OptionalInt(29).value_or(0);
          step.agent = a;
        }
        step.cached_from_run = s.Text(23);
        step.cached_from_step = s.Text(24);
        step.nudge_ms = s.OptionalInt(25);
        step.cell = s.Text(26);
        step.attempts = std::move(attempts[step.id]);
        step.turns = std::move(turns[step.id]);
        step.log_lines = lines[step.id];
        if (auto g = gates.find(step.id); g != gates.end())
          step.gate = std::move(g->second);
        StoredJob*& job = jobs[step.job];
        if (!job) {  // A job whose row was never written: keep its steps.
          run.jobs.push_back(StoredJob{});
          run.jobs.back().name = step.job;
          run.jobs.back().status = Settle("running", run);
          for (StoredJob& j : run.jobs) jobs[j.name] = &j;
          job = &run.jobs.back();
        }
        job->steps.push_back(std::move(step));
      });
}

}  // namespace

Result<std::string> ResolveRunId(Db& db, const std::string& id) {
  if (id.empty()) {
    Result<StatementUse> st = db.Prepared(
        "SELECT id FROM runs ORDER BY started_ms DESC, id DESC LIMIT 1");
    if (!st.ok()) return st.status();
    Result<bool> row = (*st)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return NotFound("no runs recorded yet");
    return (*st)->Text(0);
  }
  Result<StatementUse> st = db.Prepared(
      "SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1 ORDER BY"
      " id = ?1 DESC, id LIMIT 2");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, id);
  std::vector<std::string> found;
  while (true) {
    Result<bool> row = (*st)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    found.push_back((*st)->Text(0));
  }
  if (found.empty()) return NotFound("no run '" + id + "'");
  if (found[0] != id && found.size() > 1) {
    return InvalidArgument("'" + id + "' names more than one run (" + found[0] +
                           ", " + found[1] + ", ...)");
  }
  return found[0];
}

bool RunProcessAlive(const std::string& state_dir, const std::string& run_id,
                     const std::string& host, int64_t pid,
                     const std::string& pid_start) {
  if (host != HostName()) {
    // Its process cannot be checked from here; its lock can, where the
    // folder is shared. A missing lock file cannot be told from a live run.
    std::error_code ec;
    if (!std::filesystem::exists(RunLockPath(state_dir, run_id), ec))
      return true;
    return RunIsLocked(state_dir, run_id);
  }
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // The pid exists: is it still the run's process?
  const std::string now = ProcessStartTime(pid);
  return pid_start.empty() || now.empty() || now == pid_start;
}

Result<std::vector<StoredRun>> ListRuns(Store& store, int limit) {
  std::vector<StoredRun> runs;
  Status s = store.Read([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        RunColumns() + " ORDER BY started_ms DESC, id DESC LIMIT ?1");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, int64_t{limit > 0 ? limit : -1});
    return (*st)->EachRow([&](const Statement& row) {
      runs.push_back(ReadRunRow(row, StateDirOf(store)));
    });
  });
  if (!s.ok()) return s;
  return runs;
}

Result<StoredLog> LoadStepLog(Store& store, const std::string& run_id,
                              const std::string& step_id, int64_t after_seq,
                              int limit) {
  StoredLog log;
  Status s = store.Read([&](Db& db) -> Status {
    Result<std::string> resolved = ResolveRunId(db, run_id);
    if (!resolved.ok()) return resolved.status();
    log.run_id = *resolved;
    log.step_id = step_id;
    Result<StatementUse> exists = db.Prepared(
        "SELECT (SELECT COUNT(*) FROM steps WHERE run_id = ?1 AND"
        " step_id = ?2), (SELECT MAX(seq) FROM output_lines WHERE"
        " run_id = ?1 AND step_id = ?2)");
    if (!exists.ok()) return exists.status();
    (*exists)->Bind(1, log.run_id);
    (*exists)->Bind(2, step_id);
    Result<bool> row = (*exists)->Step();
    if (!row.ok()) return row.status();
    if (!*row || (*exists)->Int(0) == 0) {
      return NotFound("no step '" + step_id + "' in run '" + log.run_id + "'");
    }
    log.last_seq = (*exists)->OptionalInt(1).value_or(0);
    Result<StatementUse> st = db.Prepared(
        "SELECT seq, stream, line FROM output_lines WHERE run_id = ?1 AND"
        " step_id = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4");
    if (!st.ok()) return st.status();
    Statement& q = **st;
    q.Bind(1, log.run_id);
    q.Bind(2, step_id);
    q.Bind(3, after_seq);
    q.Bind(4, int64_t{limit > 0 ? limit : -1});
    return q.EachRow([&](const Statement& row) {
      log.lines.push_back({row.Int(0), row.Text(1), row.Text(2)});
    });
  });
  if (!s.ok()) return s;
  return log;
}

Result<std::vector<StoredInterruption>> ReadInterruptions(
    Db& db, const std::string& run_id) {
  std::vector<StoredInterruption> out;
  Status s =
      ForRunRows(db,
                 "SELECT number, status, died_ms, resumed_ms, taken_by FROM"
                 " run_interruptions WHERE run_id = ?1 ORDER BY number",
                 run_id, [&](const Statement& row) {
                   out.push_back({static_cast<int>(row.Int(0)), row.Text(1),
                                  row.Int(2), row.Int(3), row.Text(4)});
                 });
  if (!s.ok()) return s;
  return out;
}

Result<StoredRun> LoadRun(Store& store, const std::string& id) {
  StoredRun run;
  Status s = store.Read([&](Db& db) -> Status {
    // One read transaction: the run, its jobs and steps from one snapshot.
    if (Status b = db.Exec("BEGIN"); !b.ok()) return b;
    Status result = [&]() -> Status {
      Result<std::string> resolved = ResolveRunId(db, id);
      if (!resolved.ok()) return resolved.status();
      Result<StatementUse> st = db.Prepared(RunColumns() + " WHERE id = ?1");
      if (!st.ok()) return st.status();
      (*st)->Bind(1, *resolved);
      Result<bool> row = (*st)->Step();
      if (!row.ok()) return row.status();
      if (!*row) return NotFound("no run '" + *resolved + "'");
      run = ReadRunRow(**st, StateDirOf(store));
      if (Status p = LoadPlan(db, run); !p.ok()) return p;
      Result<std::vector<StoredInterruption>> stops =
          ReadInterruptions(db, run.id);
      if (!stops.ok()) return stops.status();
      run.interruptions = std::move(*stops);

      Status jobs = ForRunRows(
          db,
          "SELECT name, status, error, caused_by_error, execution,"
          " started_ms, duration_ms, deadline_ms FROM jobs WHERE run_id = ?1"
          " ORDER BY started_ms, rowid",
          run.id, [&](const Statement& j) {
            StoredJob job;
            job.name = j.Text(0);
            job.status = Settle(j.Text(1), run);
            job.error = j.Text(2);
            job.caused_by_error = j.Int(3) != 0;
            job.execution = JsonStrings(j.Text(4));
            job.started_ms = j.Int(5);
            job.duration_ms = j.OptionalInt(6);
            job.deadline_ms = j.OptionalInt(7);
            run.jobs.push_back(std::move(job));
          });
      if (!jobs.ok()) return jobs;
      return LoadSteps(db, run);
    }();
    db.Exec("COMMIT");
    return result;
  });
  if (!s.ok()) return s;
  return run;
}

StoredSpend StepSpend(const StoredStep& s) {
  StoredSpend spend;
  if (s.cached) return spend;
  if (s.agent) {
    return {s.agent->prompt_tokens, s.agent->completion_tokens, s.agent->usd};
  }
  for (const StoredTurn& t : s.turns)
    spend.Add({t.prompt_tokens, t.completion_tokens, t.usd});
  return spend;
}

}  // namespace steps::store
