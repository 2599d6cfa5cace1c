#include "store/recorder.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/hash.h"
#include "core/json_text.h"
#include "core/log.h"
#include "store/conversation_log.h"

namespace steps::store {

namespace {

int64_t ToMs(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.time_since_epoch())
      .count();
}

std::string HookName(const pipeline::StepRef& s) {
  return s.hook ? pipeline::HookKindName(*s.hook) : "";
}

// Binds a hook name, or NULL for a step that is not a hook.
void BindHook(Statement& st, int index, const pipeline::StepRef& s) {
  if (s.hook) {
    st.Bind(index, std::string_view(HookName(s)));
  } else {
    st.BindNull(index);
  }
}

// The output an end keeps: all of it, or once the disk is full
// (Store::disk_full) its last Store::kFullDiskOutputBytes, from a character's
// first byte, so that the ends still fit.
std::string_view KeptOutput(std::string_view output, bool disk_full) {
  if (!disk_full || output.size() <= Store::kFullDiskOutputBytes) return output;
  output.remove_prefix(output.size() - Store::kFullDiskOutputBytes);
  for (int i = 0; i < 3 && !output.empty() &&
                  (static_cast<unsigned char>(output[0]) & 0xC0) == 0x80;
       ++i) {
    output.remove_prefix(1);
  }
  return output;
}

// Who ran an attempt: the run's user on the Slurm node, with the job
// ("ci@node-3 (slurm job 1234)"), for an attempt Slurm ran; else the run's.
std::string AttemptTakenBy(const std::string& run_by,
                           const pipeline::AttemptRecord& a) {
  if (!a.slurm || a.slurm->job_id.empty()) return run_by;
  const size_t at = run_by.find('@');
  const size_t paren = run_by.find(" (");
  std::string who = run_by.substr(0, paren);
  if (!a.slurm->node.empty() && at != std::string::npos)
    who = run_by.substr(0, at) + "@" + a.slurm->node;
  std::string facts = "slurm job " + a.slurm->job_id;
  // Never started: `who` is still this machine, which did not run it.
  if (a.slurm->node.empty()) facts += ", never started";
  if (paren != std::string::npos && run_by.back() == ')') {
    facts = run_by.substr(paren + 2, run_by.size() - paren - 3) + ", " + facts;
  }
  return who + " (" + facts + ")";
}

Status WriteAttempt(Db& db, const std::string& run_id,
                    const std::string& step_id, const std::string& identity,
                    const std::string& taken_by,
                    const pipeline::AttemptRecord& a, bool disk_full) {
  Result<StatementUse> st = db.Prepared(
      "INSERT INTO attempts (run_id, step_id, number, of, status, started_ms,"
      " duration_ms, identity, exit_code, timed_out, clipped_to_ms,"
      " exhausted_by, error, output, fixed, taken_by, slurm_job, queued_ms)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
      " ?15, ?16, ?17, ?18)"
      " ON CONFLICT (run_id, step_id, number) DO UPDATE SET"
      " of = ?4, status = ?5, started_ms = ?6, duration_ms = ?7,"
      " identity = ?8, exit_code = ?9, timed_out = ?10, clipped_to_ms = ?11,"
      " exhausted_by = ?12, error = ?13, output = ?14, fixed = ?15,"
      " taken_by = ?16, slurm_job = ?17, queued_ms = ?18"
      // The step's end writes each attempt again: one stored as it is
      // (its output up to 1 MiB) is not rewritten.
      " WHERE (of, status, started_ms, duration_ms, identity, exit_code,"
      " timed_out, clipped_to_ms, exhausted_by, error, output, fixed,"
      " taken_by, slurm_job, queued_ms)"
      " IS NOT (?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
      " ?17, ?18)");
  if (!st.ok()) return st.status();
  Statement& s = **st;
  s.Bind(1, run_id);
  s.Bind(2, step_id);
  s.Bind(3, int64_t{a.number});
  s.Bind(4, int64_t{a.of});
  s.Bind(5, OutcomeName(a.outcome));
  s.Bind(6, ToMs(a.started));
  s.Bind(7, int64_t{a.duration.count()});
  s.Bind(8, identity);
  s.Bind(9, a.exit_code ? std::optional<int64_t>(*a.exit_code) : std::nullopt);
  s.Bind(10, int64_t{a.timed_out});
  s.Bind(11, a.clipped_to ? std::optional<int64_t>(a.clipped_to->count())
                          : std::nullopt);
  s.Bind(12, a.exhausted_by);
  s.Bind(13, a.error);
  s.Bind(14, KeptOutput(a.output, disk_full));
  s.Bind(15, int64_t{a.fixed});
  s.Bind(16, AttemptTakenBy(taken_by, a));
  if (a.slurm) {
    s.Bind(17, a.slurm->job_id);
    s.Bind(18, int64_t{a.slurm->queued.count()});
  } else {
    s.BindNull(17);
    s.BindNull(18);
  }
  return s.Run();
}

// The tool_calls column: one object per call, read back by LoadRun.
nlohmann::json ToolCallsColumn(
    const std::vector<agent::ToolCallRecord>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const agent::ToolCallRecord& c : calls) {
    out.push_back({{"name", c.name},
                   {"arguments", c.arguments},
                   {"arguments_truncated", c.arguments_truncated},
                   {"result", c.result ? nlohmann::json(*c.result) : nullptr},
                   {"result_truncated", c.result_truncated},
                   {"result_bytes", c.result_bytes},
                   {"is_error", c.is_error}});
  }
  return out;
}

// What a turn's row holds besides its time, hashed: two records with the
// same print make the same row.
uint64_t TurnPrint(const agent::AgentTurnRecord& t) {
  uint64_t h = 0x5EED;
  auto add = [&h](std::string_view field) { h = FastHashChain(h, field); };
  auto add_number = [&add](auto n) {
    char bytes[sizeof(n)];
    std::memcpy(bytes, &n, sizeof(n));
    add(std::string_view(bytes, sizeof(n)));
  };
  add_number(t.turn);
  add_number(t.provider_requests);
  add(t.source);
  add_number(t.prompt_tokens);
  add_number(t.completion_tokens);
  add_number(t.usd);
  add(t.text);
  add_number(t.tool_calls.size());
  for (const agent::ToolCallRecord& c : t.tool_calls) {
    add(c.name);
    add(c.arguments);
    add_number(c.arguments_truncated);
    add_number(c.result.has_value());
    if (c.result) add(*c.result);
    add_number(c.result_truncated);
    add_number(c.result_bytes);
    add_number(c.is_error);
  }
  return h;
}

// A turn's row. `at_ms` is when its answer arrived: set by the turn's own
// event; the rewrite at the step's end (at_ms unset) keeps it.
Status WriteTurn(Db& db, const std::string& run_id, const std::string& step_id,
                 const agent::AgentTurnRecord& t,
                 std::optional<int64_t> at_ms) {
  Result<StatementUse> st = db.Prepared(
      "INSERT INTO agent_turns (run_id, step_id, turn, provider_requests,"
      " source, prompt_tokens, completion_tokens, usd, tool_calls, text,"
      " at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
      " ON CONFLICT (run_id, step_id, turn) DO UPDATE SET"
      " provider_requests = ?4, source = ?5, prompt_tokens = ?6,"
      " completion_tokens = ?7, usd = ?8, tool_calls = ?9, text = ?10,"
      " at_ms = COALESCE(?11, at_ms)");
  if (!st.ok()) return st.status();
  Statement& s = **st;
  s.Bind(1, run_id);
  s.Bind(2, step_id);
  s.Bind(3, int64_t{t.turn});
  s.Bind(4, int64_t{t.provider_requests});
  s.Bind(5, t.source);
  s.Bind(6, t.prompt_tokens);
  s.Bind(7, t.completion_tokens);
  s.Bind(8, t.usd);
  s.Bind(9, DumpJson(ToolCallsColumn(t.tool_calls)));
  s.Bind(10, t.text);
  s.Bind(11, at_ms);
  return s.Run();
}

// Whether a log line about a step is an agent's deadline nudge
// (FormatLogEvent: "INF agent.nudge agent=...").
bool IsNudgeLine(std::string_view line) {
  const size_t space = line.find(' ');
  return space != std::string_view::npos &&
         line.substr(space + 1).rfind("agent.nudge ", 0) == 0;
}

}  // namespace

std::string HostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

std::string ProcessStartTime(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces, inside parentheses):
  // state is field 3, starttime field 22.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return field;
  }
  return "";
}

RunRecorder::RunRecorder(Store& store, Clock& clock)
    : store_(store), clock_(clock) {}

RunRecorder::~RunRecorder() { StopAlive(); }

void RunRecorder::StartAlive() {
  std::string run_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    run_id = run_id_;
  }
  alive_ = std::thread([this, run_id] {
    std::unique_lock<std::mutex> lock(alive_mu_);
    while (!alive_cv_.wait_for(lock, kAliveEvery,
                               [this] { return alive_stop_; })) {
      lock.unlock();
      const int64_t now = ToMs(clock_.WallNow());
      // Nothing waits on it, and it is worth no transaction of its own; a
      // stamp that could not be written (a full disk) is not missed.
      store_.WriteSoon(
          [run_id, now](Db& db) -> Status {
            Result<StatementUse> st = db.Prepared(
                "UPDATE runs SET alive_ms = max(coalesce(alive_ms, 0), ?2)"
                " WHERE id = ?1");
            if (!st.ok()) return st.status();
            (*st)->Bind(1, run_id);
            (*st)->Bind(2, now);
            return (*st)->Run();
          },
          [](const Status&) {}, 64, Store::Soon::kPayload);
      lock.lock();
    }
  });
}

void RunRecorder::StopAlive() {
  {
    std::lock_guard<std::mutex> lock(alive_mu_);
    alive_stop_ = true;
  }
  alive_cv_.notify_all();
  if (alive_.joinable()) alive_.join();
}

RunRecorder::WriteContext RunRecorder::Context() {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteContext{run_id_, taken_by_, &store_, turn_rows_written_};
}

void RunRecorder::SetPlan(std::vector<PlannedJob> outline) {
  std::lock_guard<std::mutex> lock(mu_);
  outline_ = std::move(outline);
}

void RunRecorder::Check(const Status& s) { store_.WarnWriteFailed(s); }

std::optional<int64_t> RunRecorder::WallMs(std::optional<SteadyTime> t) const {
  if (!t) return std::nullopt;
  return ToMs(clock_.WallNow() +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  *t - clock_.Now()));
}

Store::WaitUntil RunRecorder::WriteLimit(const std::string& id) const {
  auto it = wait_until_.find(id);
  return it == wait_until_.end() ? std::nullopt : it->second;
}

void RunRecorder::SetFile(std::string hash, std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  file_hash_ = std::move(hash);
  file_text_ = std::move(text);
}

void RunRecorder::SetResume(std::string status, int64_t died_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  resume_status_ = std::move(status);
  died_ms_ = died_ms;
}

std::string RunRecorder::StoredId(const pipeline::StepRef& step,
                                  bool starting) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = current_id_.find(step.id);
  if (!starting && it != current_id_.end()) return it->second;
  // A resumed run's step that had not ended continues its row: the latest
  // of the step's runs (ID, then ID~2, ...) that had not.
  std::string reopened;
  int reopened_run = 0;
  for (const std::string& id : reopen_) {
    if (id.compare(0, step.id.size(), step.id) != 0) continue;
    int run = 0;
    if (id.size() == step.id.size()) {
      run = 1;
    } else if (id[step.id.size()] == '~') {
      run = std::atoi(id.c_str() + step.id.size() + 1);
    }
    if (run > reopened_run) {
      reopened_run = run;
      reopened = id;
    }
  }
  if (reopened_run > 0) {
    reopen_.erase(reopened);
    current_id_[step.id] = reopened;
    return reopened;
  }
  int n = ++runs_of_id_[step.id];
  std::string id = n == 1 ? step.id : step.id + "~" + std::to_string(n);
  current_id_[step.id] = id;
  return id;
}

Status RunRecorder::ReopenRun(Db& db, const pipeline::RunRecord& run) {
  Result<StatementUse> st = db.Prepared(
      "UPDATE runs SET status = 'running', duration_ms = NULL, host = ?2,"
      " pid = ?3, pid_start = ?4 WHERE id = ?1");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, run.id);
  (*st)->Bind(2, HostName());
  (*st)->Bind(3, int64_t{getpid()});
  (*st)->Bind(4, ProcessStartTime(getpid()));
  if (Status s = (*st)->Run(); !s.ok()) return s;
  Result<StatementUse> in = db.Prepared(
      "INSERT INTO run_interruptions (run_id, number, status, died_ms,"
      " resumed_ms, taken_by) VALUES (?1, (SELECT count(*) + 1 FROM"
      " run_interruptions WHERE run_id = ?1), ?2, ?3, ?4, ?5)");
  if (!in.ok()) return in.status();
  (*in)->Bind(1, run.id);
  (*in)->Bind(2, *resume_status_);
  (*in)->Bind(3, died_ms_);
  (*in)->Bind(4, ToMs(clock_.WallNow()));
  (*in)->Bind(5, run.taken_by);
  if (Status s = (*in)->Run(); !s.ok()) return s;
  return LoadCounters(db);
}

// Sequence numbers, output lines and checkpoints continue from the stored
// ones; "ID~N" ids count as runs of ID.
Status RunRecorder::LoadCounters(Db& db) {
  Result<StatementUse> st = db.Prepared(
      "SELECT s.step_id, s.status, max(s.start_seq, coalesce(s.end_seq, 0)),"
      " (SELECT count(*) FROM output_lines o WHERE o.run_id = s.run_id AND"
      "   o.step_id = s.step_id),"
      " (SELECT coalesce(max(seq), 0) FROM conversation_log c WHERE"
      "   c.run_id = s.run_id AND c.step_id = s.step_id)"
      " FROM steps s WHERE s.run_id = ?1");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, run_id_);
  return (*st)->EachRow([&](const Statement& s) {
    const std::string id = s.Text(0);
    const std::string status = s.Text(1);
    seq_ = std::max(seq_, s.Int(2));
    output_lines_[id] = static_cast<int>(s.Int(3));
    checkpoints_[id] = s.Int(4);
    ++runs_of_id_[id.substr(0, id.find('~'))];
    if (status != "succeeded" && status != "failed" && status != "errored")
      reopen_.insert(id);
  });
}

void RunRecorder::OnRunStart(const pipeline::RunRecord& run) {
  std::string plan;
  bool resuming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    run_id_ = run.id;
    taken_by_ = run.taken_by;
    plan = DumpJson(OutlineJson(outline_));
    resuming = resume_status_.has_value();
  }
  if (resuming) {
    Check(store_.Write([&](Db& db) -> Status {
      std::lock_guard<std::mutex> lock(mu_);
      return ReopenRun(db, run);
    }));
    StartAlive();
    return;
  }
  Check(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT OR REPLACE INTO runs (id, file, status, started_ms, taken_by,"
        " host, pid, pid_start, plan, file_hash, file_text) VALUES (?1, ?2,"
        " 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run.id);
    s.Bind(2, run.file);
    s.Bind(3, ToMs(run.started));
    s.Bind(4, run.taken_by);
    s.Bind(5, HostName());
    s.Bind(6, int64_t{getpid()});
    s.Bind(7, ProcessStartTime(getpid()));
    s.Bind(8, plan);
    s.Bind(9, file_hash_);
    s.Bind(10, file_text_);
    return s.Run();
  }));
  StartAlive();
}

void RunRecorder::OnJobStart(const std::string& job,
                             std::optional<SteadyTime> deadline) {
  Check(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT INTO jobs (run_id, name, status, started_ms, deadline_ms)"
        " VALUES (?1, ?2, 'running', ?3, ?4) ON CONFLICT (run_id, name) DO"
        " UPDATE SET status = 'running', deadline_ms = ?4,"
        " duration_ms = NULL");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run_id_);
    s.Bind(2, job);
    s.Bind(3, ToMs(clock_.WallNow()));
    s.Bind(4, WallMs(deadline));
    return s.Run();
  }));
}

void RunRecorder::OnStepStart(const pipeline::StepRef& step,
                              std::optional<SteadyTime> deadline) {
  const std::string id = StoredId(step, true);
  int64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = ++seq_;
  }
  // Nothing of the step has run yet: its row rides with the transaction of
  // its first attempt (or its end), not one of its own.
  store_.WriteSoon([run_id = run_id_, id, step,
                    started = ToMs(clock_.WallNow()),
                    deadline_ms = WallMs(deadline), seq](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT INTO steps (run_id, step_id, job, name, kind, hook,"
        " fixer, line, status, started_ms, deadline_ms, start_seq, cell,"
        " agent) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?9, ?10,"
        " ?11, ?12, ?13) ON CONFLICT (run_id, step_id) DO UPDATE SET"
        " status = 'running', error = '', deadline_ms = ?10,"
        " end_seq = NULL, duration_ms = NULL");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run_id);
    s.Bind(2, id);
    s.Bind(3, step.job);
    s.Bind(4, step.name);
    s.Bind(5, std::string_view(pipeline::StepKindName(step.kind)));
    BindHook(s, 6, step);
    s.Bind(7, int64_t{step.fixer});
    s.Bind(8, int64_t{step.line});
    s.Bind(9, started);
    s.Bind(10, deadline_ms);
    s.Bind(11, seq);
    s.Bind(12, step.cell);
    s.Bind(13, step.agent);
    return s.Run();
  });
}

void RunRecorder::OnAttemptStart(const pipeline::StepRef& step, int attempt,
                                 int of, std::optional<SteadyTime> deadline) {
  const std::string id = StoredId(step, false);
  // The attempt waits for a busy store (it must not run unrecorded), but
  // not past its own time. A replayed one runs nothing: its start rides
  // with its end.
  Store::WaitUntil wait_until;
  if (deadline) wait_until = OnRealClock(clock_, *deadline);
  {
    std::lock_guard<std::mutex> lock(mu_);
    wait_until_[id] = wait_until;
  }
  auto write = [run_id = run_id_, id, attempt, of,
                started = ToMs(clock_.WallNow()), deadline_ms = WallMs(deadline),
                taken_by = taken_by_](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT OR REPLACE INTO attempts (run_id, step_id, number, of, status,"
        " started_ms, deadline_ms, taken_by) VALUES (?1, ?2, ?3, ?4,"
        " 'running', ?5, ?6, ?7)");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run_id);
    s.Bind(2, id);
    s.Bind(3, int64_t{attempt});
    s.Bind(4, int64_t{of});
    s.Bind(5, started);
    s.Bind(6, deadline_ms);
    s.Bind(7, taken_by);
    return s.Run();
  };
  if (step.replayed) {
    store_.WriteSoon(std::move(write));
  } else {
    Check(store_.Write(write, wait_until));
  }
}

void RunRecorder::OnOutput(const pipeline::StepRef& step, OutputStream stream,
                           std::string_view line) {
  AddLine(step, OutputStreamName(stream), line);
}

void RunRecorder::OnLog(const pipeline::StepRef& step, std::string_view line) {
  AddLine(step, "log", line);
  if (!IsNudgeLine(line)) return;
  const std::string id = StoredId(step, false);
  // Within the attempt's time, as its other writes (a busy store).
  Store::WaitUntil wait_until;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wait_until = WriteLimit(id);
  }
  Check(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "UPDATE steps SET nudge_ms = ?3 WHERE run_id = ?1 AND step_id = ?2");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run_id_);
    s.Bind(2, id);
    s.Bind(3, ToMs(clock_.WallNow()));
    return s.Run();
  }, wait_until));
}

void RunRecorder::AddLine(const pipeline::StepRef& step,
                          std::string_view stream, std::string_view line) {
  const std::string id = StoredId(step, false);
  int seq;
  Store::WaitUntil wait_until;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = ++output_lines_[id];
    wait_until = WriteLimit(id);
  }
  if (seq > kMaxOutputLines) return;
  // Output is no durable point: lines ride with the next transaction. When
  // the queue is full, the task's reader commits it, within the step's time.
  store_.WriteSoon(
      [run_id = run_id_, id, seq, stream = std::string(stream),
       line = std::string(line)](Db& db) -> Status {
        Result<StatementUse> st = db.Prepared(
            "INSERT OR REPLACE INTO output_lines (run_id, step_id, seq,"
            " stream, line) VALUES (?1, ?2, ?3, ?4, ?5)");
        if (!st.ok()) return st.status();
        Statement& s = **st;
        s.Bind(1, run_id);
        s.Bind(2, id);
        s.Bind(3, int64_t{seq});
        s.Bind(4, stream);
        s.Bind(5, line);
        return s.Run();
      },
      nullptr, line.size() + stream.size() + id.size(), Store::Soon::kPayload,
      wait_until);
}

void RunRecorder::OnAgentTurn(const pipeline::StepRef& step,
                              const agent::AgentTurnRecord& turn) {
  const std::string id = StoredId(step, false);
  const int64_t at = ToMs(clock_.WallNow());
  std::lock_guard<std::mutex> lock(mu_);
  pending_turns_[id].push_back({turn, at});
}

void RunRecorder::WriteReportedTurns(const pipeline::StepRef& step) {
  const std::string id = StoredId(step, false);
  const std::vector<PendingTurn> turns = TakePendingTurns(id);
  if (turns.empty()) return;
  const Status written = store_.Write([&, c = Context()](Db& db) -> Status {
    return WritePendingTurns(db, c, id, turns);
  });
  Check(written);
  if (written.ok()) RememberStored(id, turns);
}

std::vector<RunRecorder::PendingTurn> RunRecorder::TakePendingTurns(
    const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_turns_.find(id);
  if (it == pending_turns_.end()) return {};
  std::vector<PendingTurn> out = std::move(it->second);
  pending_turns_.erase(it);
  return out;
}

Status RunRecorder::WritePendingTurns(Db& db, const WriteContext& c,
                                      const std::string& id,
                                      const std::vector<PendingTurn>& turns) {
  for (const PendingTurn& p : turns) {
    if (Status s = WriteTurn(db, c.run_id, id, p.turn, p.at_ms); !s.ok())
      return s;
    ++*c.rows_written;
  }
  return Status::Ok();
}

void RunRecorder::RememberStored(const std::string& id,
                                 const std::vector<PendingTurn>& turns) {
  if (turns.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, uint64_t>& stored = stored_turns_[id];
  for (const PendingTurn& p : turns) stored[p.turn.turn] = TurnPrint(p.turn);
}

std::vector<const agent::AgentTurnRecord*> RunRecorder::TurnsToRewrite(
    const std::string& id, const std::vector<agent::AgentTurnRecord>& record,
    const std::vector<PendingTurn>& pending) {
  std::map<int, uint64_t> stored;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stored_turns_.find(id);
    if (it != stored_turns_.end()) {
      stored = std::move(it->second);
      stored_turns_.erase(it);
    }
  }
  for (const PendingTurn& p : pending) stored[p.turn.turn] = TurnPrint(p.turn);
  std::vector<const agent::AgentTurnRecord*> out;
  for (const agent::AgentTurnRecord& t : record) {
    auto it = stored.find(t.turn);
    if (it == stored.end() || it->second != TurnPrint(t)) out.push_back(&t);
  }
  return out;
}

int64_t RunRecorder::turn_rows_written() const {
  return turn_rows_written_->load();
}

void RunRecorder::OnCheckpoints(
    const pipeline::StepRef& step,
    const std::vector<agent::ConversationCheckpoint>& checkpoints) {
  if (store_.disk_full()) {
    if (checkpoints.empty()) return;
    // The room left is for the ends of steps: the conversation goes on
    // without new checkpoints, and a resume takes it up from its last
    // stored one.
    if (!checkpoints_dropped_.exchange(true)) {
      LogEvent(LogLevel::kWarn, "store.checkpoints_dropped",
               {{"step", step.id},
                {"effect",
                 "the disk is full: conversations are no longer "
                 "checkpointed; a resume takes each up from its "
                 "last stored checkpoint"}});
    }
    return;
  }
  // No checkpoints: a durable point for the turns alone (a cell's, relayed
  // from the node that keeps its checkpoints).
  if (checkpoints.empty()) return WriteReportedTurns(step);
  const std::string id = StoredId(step, false);
  int64_t seq;
  Store::WaitUntil wait_until;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = checkpoints_[id];
    checkpoints_[id] += static_cast<int64_t>(checkpoints.size());
    wait_until = WriteLimit(id);
  }
  const int64_t at = ToMs(clock_.WallNow());
  const std::vector<PendingTurn> turns = TakePendingTurns(id);
  const Status written = store_.Write([&, c = Context()](Db& db) -> Status {
    for (const agent::ConversationCheckpoint& cp : checkpoints) {
      if (Status s = WriteCheckpoint(db, run_id_, id, ++seq, at, cp); !s.ok())
        return s;
    }
    return WritePendingTurns(db, c, id, turns);
  }, wait_until);
  Check(written);
  if (written.ok()) RememberStored(id, turns);
}

// An attempt's and a step's end ride with what follows them (the next
// attempt's start: a sequence of tasks costs one transaction per task), or
// are committed on their own within Store::kEndLinger when nothing does.
void RunRecorder::OnAttemptEnd(const pipeline::StepRef& step,
                               const pipeline::AttemptRecord& attempt) {
  const std::string id = StoredId(step, false);
  const size_t bytes = attempt.output.size() + attempt.error.size();
  store_.WriteSoon(
      [c = Context(), id, attempt](Db& db) -> Status {
        return WriteAttempt(db, c.run_id, id, attempt.identity, c.taken_by,
                            attempt, c.store->disk_full());
      },
      nullptr, bytes, Store::Soon::kEnd);
}

void RunRecorder::OnStepEnd(const pipeline::StepRecord& step) {
  if (step.resumed) return;  // The stored record stands.
  const std::string id = StoredId(step.ref, false);
  int64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = ++seq_;
    wait_until_.erase(id);
  }
  std::vector<PendingTurn> turns = TakePendingTurns(id);
  // The write owns what it writes: the turns whose stored row differs from
  // the record, by their place in it.
  auto owned = std::make_shared<const pipeline::StepRecord>(step);
  std::vector<size_t> rewrite;
  if (owned->agent) {
    const std::vector<agent::AgentTurnRecord>& all = owned->agent->turn_records;
    for (const agent::AgentTurnRecord* t : TurnsToRewrite(id, all, turns))
      rewrite.push_back(static_cast<size_t>(t - all.data()));
  }
  size_t bytes = step.output.size() + step.error.size();
  for (const pipeline::AttemptRecord& a : step.attempts)
    bytes += a.output.size() + a.error.size();
  store_.WriteSoon(
      [c = Context(), id, seq, turns = std::move(turns),
       rewrite = std::move(rewrite), owned](Db& db) -> Status {
        return WriteStepEnd(db, c, id, seq, *owned, turns, rewrite);
      },
      nullptr, bytes, Store::Soon::kEnd);
}

Status RunRecorder::WriteStepEnd(Db& db, const WriteContext& c,
                                 const std::string& id, int64_t seq,
                                 const pipeline::StepRecord& step,
                                 const std::vector<PendingTurn>& turns,
                                 const std::vector<size_t>& rewrite) {
  if (Status w = WritePendingTurns(db, c, id, turns); !w.ok()) return w;
  Result<StatementUse> st = db.Prepared(
      "INSERT INTO steps (run_id, step_id, job, name, kind, hook, fixer,"
      " line, status, error, output, started_ms, duration_ms, identity,"
      " cached, start_seq, end_seq, agent_turns, provider_requests,"
      " prompt_tokens, completion_tokens, usd, nudge_sent,"
      " deadline_disclosed, fallbacks_taken, cached_from_run,"
      " cached_from_step, cell, retries, retries_denied, rate_wait_ms,"
      " agent) VALUES (?1, ?2, ?3, ?4, ?5,"
      " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17, ?18,"
      " ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)"
      " ON CONFLICT (run_id, step_id) DO UPDATE SET status = ?9,"
      " error = ?10, output = ?11, started_ms = ?12, duration_ms = ?13,"
      " identity = ?14, cached = ?15, end_seq = ?16, agent_turns = ?17,"
      " provider_requests = ?18, prompt_tokens = ?19,"
      " completion_tokens = ?20, usd = ?21, nudge_sent = ?22,"
      " deadline_disclosed = ?23, fallbacks_taken = ?24,"
      " cached_from_run = ?25, cached_from_step = ?26, retries = ?28,"
      " retries_denied = ?29, rate_wait_ms = ?30");
  if (!st.ok()) return st.status();
  Statement& s = **st;
  const pipeline::StepRef& ref = step.ref;
  s.Bind(1, c.run_id);
  s.Bind(2, id);
  s.Bind(3, ref.job);
  s.Bind(4, ref.name);
  s.Bind(5, std::string_view(pipeline::StepKindName(ref.kind)));
  BindHook(s, 6, ref);
  s.Bind(7, int64_t{ref.fixer});
  s.Bind(8, int64_t{ref.line});
  s.Bind(9, OutcomeName(step.outcome));
  s.Bind(10, step.error);
  s.Bind(11, KeptOutput(step.output, c.store->disk_full()));
  s.Bind(12, ToMs(step.started));
  s.Bind(13, int64_t{step.duration.count()});
  s.Bind(14, step.identity);
  s.Bind(15, int64_t{step.cached});
  s.Bind(16, seq);
  s.Bind(27, ref.cell);
  s.Bind(31, ref.agent);
  if (const auto& a = step.agent) {
    s.Bind(17, int64_t{a->turns});
    s.Bind(18, int64_t{a->provider_requests});
    s.Bind(19, a->prompt_tokens);
    s.Bind(20, a->completion_tokens);
    s.Bind(21, a->usd);
    s.Bind(22, int64_t{a->nudge_sent});
    s.Bind(23, int64_t{a->deadline_disclosed});
    s.Bind(24, DumpJson(nlohmann::json(a->fallbacks_taken)));
    s.Bind(28, int64_t{a->retries});
    s.Bind(29, int64_t{a->retries_denied});
    s.Bind(30, int64_t{a->rate_waited.count()});
  }
  if (step.cached) {
    s.Bind(25, step.cached_from_run);
    s.Bind(26, step.cached_from_step);
  }
  if (Status r = s.Run(); !r.ok()) return r;
  // The record is the authority: attempts that ended without an event of
  // their own (a retry wait cut by an abort) and every agent turn.
  for (const pipeline::AttemptRecord& a : step.attempts) {
    if (Status r = WriteAttempt(db, c.run_id, id, step.identity, c.taken_by, a,
                                c.store->disk_full());
        !r.ok()) {
      return r;
    }
  }
  // Turns whose row is stored as the record has them are not written
  // again.
  for (size_t t : rewrite) {
    if (Status r = WriteTurn(db, c.run_id, id, step.agent->turn_records[t],
                             std::nullopt);
        !r.ok())
      return r;
    ++*c.rows_written;
  }
  return Status::Ok();
}

void RunRecorder::OnJobEnd(const pipeline::JobRecord& job) {
  Check(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT INTO jobs (run_id, name, status, error, caused_by_error,"
        " execution, started_ms, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5,"
        " ?6, ?7, ?8) ON CONFLICT (run_id, name) DO UPDATE SET status = ?3,"
        " error = ?4, caused_by_error = ?5, execution = ?6, started_ms = ?7,"
        " duration_ms = ?8");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run_id_);
    s.Bind(2, job.name);
    s.Bind(3, OutcomeName(job.outcome));
    s.Bind(4, job.error);
    s.Bind(5, int64_t{job.caused_by_error});
    s.Bind(6, DumpJson(nlohmann::json(job.execution)));
    s.Bind(7, ToMs(job.started));
    s.Bind(8, int64_t{job.duration.count()});
    return s.Run();
  }));
}

void RunRecorder::OnRunEnd(const pipeline::RunRecord& run) {
  StopAlive();
  Check(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "UPDATE runs SET status = ?2, duration_ms = ?3 WHERE id = ?1");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run.id);
    s.Bind(2, OutcomeName(run.outcome));
    s.Bind(3, int64_t{run.duration.count()});
    return s.Run();
  }));
}

}  // namespace steps::store
