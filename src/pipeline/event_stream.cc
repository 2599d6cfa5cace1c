#include "pipeline/event_stream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/json_text.h"

namespace steps::pipeline {
namespace {

using nlohmann::json;

// The longest deadline a line may carry: the longest duration a pipeline
// file may state (876000h).
constexpr int64_t kMaxLeftMs = int64_t{876000} * 3600 * 1000;

// Why a value does not read; thrown inside this file only, caught by each
// public reader and returned as a Status.
struct Bad {
  std::string what;
};

const json* Field(const json& j, const char* key) {
  if (!j.is_object()) throw Bad{"expected an object"};
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string Str(const json& j, const char* key) {
  const json* f = Field(j, key);
  if (f == nullptr) return "";
  if (!f->is_string()) throw Bad{std::string(key) + " is not a string"};
  return f->get<std::string>();
}

int64_t Int(const json& j, const char* key, int64_t lo = 0,
            int64_t hi = std::numeric_limits<int64_t>::max()) {
  const json* f = Field(j, key);
  if (f == nullptr) return std::clamp<int64_t>(0, lo, hi);
  if (!f->is_number_integer())
    throw Bad{std::string(key) + " is not a whole number"};
  if (f->is_number_unsigned()) {
    const uint64_t u = f->get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi) ||
        (lo > 0 && u < static_cast<uint64_t>(lo)))
      throw Bad{std::string(key) + " is out of range"};
    return static_cast<int64_t>(u);
  }
  const int64_t v = f->get<int64_t>();
  if (v < lo || v > hi) throw Bad{std::string(key) + " is out of range"};
  return v;
}

int SmallInt(const json& j, const char* key, int lo = 0) {
  return static_cast<int>(Int(j, key, lo, std::numeric_limits<int>::max()));
}

double Usd(const json& j, const char* key) {
  const json* f = Field(j, key);
  if (f == nullptr) return 0;
  if (!f->is_number()) throw Bad{std::string(key) + " is not a number"};
  const double v = f->get<double>();
  if (!std::isfinite(v) || v < 0)
    throw Bad{std::string(key) + " is out of range"};
  return v;
}

bool Flag(const json& j, const char* key) {
  const json* f = Field(j, key);
  if (f == nullptr) return false;
  if (!f->is_boolean()) throw Bad{std::string(key) + " is not true or false"};
  return f->get<bool>();
}

const json& Array(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json* f = Field(j, key);
  if (f == nullptr) return kEmpty;
  if (!f->is_array()) throw Bad{std::string(key) + " is not a list"};
  return *f;
}

// A time of day: from the epoch to the year 2286, so that differences
// with now stay far inside a steady duration's range.
WallTime Wall(const json& j, const char* key) {
  return WallTime(Millis(Int(j, key, 0, int64_t{10'000'000'000'000})));
}

Millis Ms(const json& j, const char* key) { return Millis(Int(j, key)); }

int64_t ToMs(WallTime t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

Outcome ReadOutcome(const json& j, const char* key) {
  const std::string name = Str(j, key);
  // ParseOutcome reads the outcomes a file may name; a record may also
  // never have started.
  if (name == OutcomeName(Outcome::kNotStarted)) return Outcome::kNotStarted;
  const std::optional<Outcome> o = ParseOutcome(name);
  if (!o) throw Bad{std::string(key) + " is not an outcome"};
  return *o;
}

StepKind ReadKind(const std::string& name) {
  for (StepKind k : {StepKind::kTask, StepKind::kGet, StepKind::kPut,
                     StepKind::kAgent, StepKind::kInParallel, StepKind::kDo,
                     StepKind::kTry, StepKind::kAcross, StepKind::kGate}) {
    if (name == StepKindName(k)) return k;
  }
  throw Bad{"kind is not a step kind"};
}

OutputStream ReadStream(const std::string& name) {
  if (name == "stdout") return OutputStream::kStdout;
  if (name == "stderr") return OutputStream::kStderr;
  throw Bad{"stream is neither stdout nor stderr"};
}

constexpr std::pair<GateVerdict::How, const char*> kHows[] = {
    {GateVerdict::How::kDecided, "decided"},
    {GateVerdict::How::kExpired, "expired"},
    {GateVerdict::How::kCut, "cut"},
    {GateVerdict::How::kAborted, "aborted"}};

json GateToJson(const GateVerdict& g) {
  json j;
  for (const auto& [how, name] : kHows)
    if (how == g.how) j["how"] = name;
  j["decision"] = GateDecisionName(g.decision);
  j["by"] = g.by;
  j["via"] = g.via;
  j["reason"] = g.reason;
  j["at_ms"] = ToMs(g.at);
  return j;
}

GateVerdict ReadGate(const json& j) {
  GateVerdict g;
  const std::string how = Str(j, "how");
  bool known = false;
  for (const auto& [h, name] : kHows) {
    if (how == name) {
      g.how = h;
      known = true;
    }
  }
  if (!known) throw Bad{"gate.how is not known"};
  const std::string decision = Str(j, "decision");
  if (decision == GateDecisionName(GateDecision::kApprove)) {
    g.decision = GateDecision::kApprove;
  } else if (decision != GateDecisionName(GateDecision::kReject)) {
    throw Bad{"gate.decision is neither approve nor reject"};
  }
  g.by = Str(j, "by");
  g.via = Str(j, "via");
  g.reason = Str(j, "reason");
  g.at = Wall(j, "at_ms");
  return g;
}

StepRef ReadRef(const json& j) {
  StepRef r;
  r.id = Str(j, "id");
  if (r.id.empty()) throw Bad{"id is missing"};
  r.job = Str(j, "job");
  r.name = Str(j, "name");
  r.kind = ReadKind(Str(j, "kind"));
  if (const std::string hook = Str(j, "hook"); !hook.empty()) {
    bool known = false;
    for (HookKind h : kAllHooks) {
      if (hook == HookKindName(h)) {
        r.hook = h;
        known = true;
      }
    }
    if (!known) throw Bad{"hook is not a hook"};
  }
  r.fixer = Flag(j, "fixer");
  r.judge = Flag(j, "judge");
  r.agent = Str(j, "agent");
  r.line = SmallInt(j, "line");
  r.cell = Str(j, "cell");
  r.replayed = Flag(j, "replayed");
  return r;
}

AttemptRecord ReadAttempt(const json& j) {
  AttemptRecord a;
  a.number = SmallInt(j, "number", 1);
  a.of = SmallInt(j, "of", 1);
  a.outcome = ReadOutcome(j, "outcome");
  a.started = Wall(j, "started_ms");
  a.duration = Ms(j, "duration_ms");
  if (Field(j, "exit_code") != nullptr)
    a.exit_code = static_cast<int>(Int(j, "exit_code", -1000, 1000));
  a.timed_out = Flag(j, "timed_out");
  if (Field(j, "clipped_to_ms") != nullptr)
    a.clipped_to = Ms(j, "clipped_to_ms");
  a.exhausted_by = Str(j, "exhausted_by");
  a.error = Str(j, "error");
  a.output = Str(j, "output");
  a.fixed = Flag(j, "fixed");
  if (const json* s = Field(j, "slurm")) {
    SlurmAttempt sa;
    sa.job_id = Str(*s, "job_id");
    sa.node = Str(*s, "node");
    sa.queued = Ms(*s, "queued_ms");
    a.slurm = std::move(sa);
  }
  a.lost = Flag(j, "lost");
  a.identity = Str(j, "identity");
  for (const json& c : Array(j, "assertions")) {
    a.assertions.push_back(
        {Str(c, "name"), !Flag(c, "failed"), Str(c, "detail")});
  }
  for (const json& p : Array(j, "printed")) {
    a.printed.push_back({ReadStream(Str(p, "stream")), Str(p, "text")});
  }
  return a;
}

agent::AgentTurnRecord ReadTurn(const json& j) {
  agent::AgentTurnRecord t;
  t.turn = SmallInt(j, "turn", 1);
  t.provider_requests = SmallInt(j, "provider_requests");
  t.source = Str(j, "source");
  t.prompt_tokens = Int(j, "prompt_tokens");
  t.completion_tokens = Int(j, "completion_tokens");
  t.usd = Usd(j, "usd");
  for (const json& c : Array(j, "tool_calls")) {
    agent::ToolCallRecord r;
    r.name = Str(c, "name");
    r.arguments = Str(c, "arguments");
    r.arguments_truncated = Flag(c, "arguments_truncated");
    if (Field(c, "result") != nullptr) r.result = Str(c, "result");
    r.result_truncated = Flag(c, "result_truncated");
    r.result_bytes = Int(c, "result_bytes");
    r.is_error = Flag(c, "is_error");
    t.tool_calls.push_back(std::move(r));
  }
  t.text = Str(j, "text");
  return t;
}

agent::AgentResult ReadAgent(const json& j) {
  agent::AgentResult a;
  a.outcome = ReadOutcome(j, "outcome");
  a.answer = Str(j, "answer");
  a.error = Str(j, "error");
  a.turns = SmallInt(j, "turns");
  a.provider_requests = SmallInt(j, "provider_requests");
  a.retries = SmallInt(j, "retries");
  a.retries_denied = SmallInt(j, "retries_denied");
  a.rate_waited = Ms(j, "rate_waited_ms");
  a.prompt_tokens = Int(j, "prompt_tokens");
  a.completion_tokens = Int(j, "completion_tokens");
  a.usd = Usd(j, "usd");
  a.deadline_disclosed = Flag(j, "deadline_disclosed");
  a.nudge_sent = Flag(j, "nudge_sent");
  for (const json& f : Array(j, "fallbacks_taken")) {
    if (!f.is_string()) throw Bad{"fallbacks_taken holds a non-string"};
    a.fallbacks_taken.push_back(f.get<std::string>());
  }
  for (const json& t : Array(j, "turn_records"))
    a.turn_records.push_back(ReadTurn(t));
  return a;
}

StepRecord ReadStep(const json& j) {
  StepRecord s;
  const json* ref = Field(j, "ref");
  if (ref == nullptr) throw Bad{"ref is missing"};
  s.ref = ReadRef(*ref);
  s.outcome = ReadOutcome(j, "outcome");
  s.error = Str(j, "error");
  s.output = Str(j, "output");
  s.started = Wall(j, "started_ms");
  s.duration = Ms(j, "duration_ms");
  s.identity = Str(j, "identity");
  s.cached = Flag(j, "cached");
  s.cached_from_run = Str(j, "cached_from_run");
  s.cached_from_step = Str(j, "cached_from_step");
  for (const json& a : Array(j, "attempts"))
    s.attempts.push_back(ReadAttempt(a));
  if (const json* a = Field(j, "agent")) s.agent = ReadAgent(*a);
  if (const json* g = Field(j, "gate")) s.gate = ReadGate(*g);
  s.resumed = Flag(j, "resumed");
  return s;
}

// Runs `read` and turns what it throws into a Status naming `what`.
template <typename T, typename Read>
Result<T> Guarded(const char* what, const Read& read) {
  try {
    return read();
  } catch (const Bad& bad) {
    return InvalidArgument(std::string(what) + ": " + bad.what);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(what) + ": " + e.what());
  }
}

json AgentToJson(const agent::AgentResult& a) {
  json j;
  j["outcome"] = OutcomeName(a.outcome);
  j["answer"] = a.answer;
  j["error"] = a.error;
  j["turns"] = a.turns;
  j["provider_requests"] = a.provider_requests;
  j["retries"] = a.retries;
  j["retries_denied"] = a.retries_denied;
  j["rate_waited_ms"] = a.rate_waited.count();
  j["prompt_tokens"] = a.prompt_tokens;
  j["completion_tokens"] = a.completion_tokens;
  j["usd"] = a.usd;
  j["deadline_disclosed"] = a.deadline_disclosed;
  j["nudge_sent"] = a.nudge_sent;
  j["fallbacks_taken"] = a.fallbacks_taken;
  json turns = json::array();
  for (const agent::AgentTurnRecord& t : a.turn_records)
    turns.push_back(TurnToJson(t));
  j["turn_records"] = std::move(turns);
  return j;
}

CellTask ReadCellTask(const json& j) {
  CellTask t;
  t.job = Str(j, "job");
  if (t.job.empty()) throw Bad{"job is missing"};
  for (const json& at : Array(j, "path")) {
    if (!at.is_number_unsigned()) throw Bad{"path holds a non-index"};
    t.path.push_back(at.get<size_t>());
  }
  if (t.path.empty()) throw Bad{"path is missing"};
  t.block_id = Str(j, "block_id");
  t.cell = static_cast<size_t>(Int(j, "cell", 0, 1 << 30));
  t.outer_cell = Str(j, "outer_cell");
  if (const json* v = Field(j, "outer_vars")) {
    if (!v->is_object()) throw Bad{"outer_vars is not an object"};
    t.outer_vars = *v;
  }
  if (Field(j, "job_deadline_ms") != nullptr)
    t.job_deadline = Wall(j, "job_deadline_ms");
  t.job_tokens_spent = Int(j, "job_tokens_spent");
  t.job_usd_spent = Usd(j, "job_usd_spent");
  if (Field(j, "sent_ms") != nullptr) t.sent = Wall(j, "sent_ms");
  for (const json& f : Array(j, "finished")) t.finished.push_back(ReadStep(f));
  return t;
}

}  // namespace

json CellTaskToJson(const CellTask& t) {
  json j = {{"job", t.job},
            {"path", t.path},
            {"block_id", t.block_id},
            {"cell", t.cell},
            {"outer_cell", t.outer_cell},
            {"outer_vars", t.outer_vars},
            {"job_tokens_spent", t.job_tokens_spent},
            {"job_usd_spent", t.job_usd_spent}};
  if (t.job_deadline) j["job_deadline_ms"] = ToMs(*t.job_deadline);
  if (t.sent) j["sent_ms"] = ToMs(*t.sent);
  if (!t.finished.empty()) {
    json finished = json::array();
    for (const StepRecord& f : t.finished)
      finished.push_back(StepRecordToJson(f));
    j["finished"] = std::move(finished);
  }
  return j;
}

Result<CellTask> CellTaskFromJson(const json& j) {
  return Guarded<CellTask>("cell task", [&] { return ReadCellTask(j); });
}

json StepRefToJson(const StepRef& r) {
  json j;
  j["id"] = r.id;
  j["job"] = r.job;
  j["name"] = r.name;
  j["kind"] = StepKindName(r.kind);
  if (r.hook) j["hook"] = HookKindName(*r.hook);
  if (r.fixer) j["fixer"] = true;
  if (r.judge) j["judge"] = true;
  if (!r.agent.empty()) j["agent"] = r.agent;
  j["line"] = r.line;
  if (!r.cell.empty()) j["cell"] = r.cell;
  if (r.replayed) j["replayed"] = true;
  return j;
}

json AttemptToJson(const AttemptRecord& a) {
  json j;
  j["number"] = a.number;
  j["of"] = a.of;
  j["outcome"] = OutcomeName(a.outcome);
  j["started_ms"] = ToMs(a.started);
  j["duration_ms"] = a.duration.count();
  if (a.exit_code) j["exit_code"] = *a.exit_code;
  if (a.timed_out) j["timed_out"] = true;
  if (a.clipped_to) j["clipped_to_ms"] = a.clipped_to->count();
  if (!a.exhausted_by.empty()) j["exhausted_by"] = a.exhausted_by;
  if (!a.error.empty()) j["error"] = a.error;
  if (!a.output.empty()) j["output"] = a.output;
  if (a.fixed) j["fixed"] = true;
  if (a.slurm) {
    j["slurm"] = {{"job_id", a.slurm->job_id},
                  {"node", a.slurm->node},
                  {"queued_ms", a.slurm->queued.count()}};
  }
  if (a.lost) j["lost"] = true;
  if (!a.identity.empty()) j["identity"] = a.identity;
  if (!a.assertions.empty()) {
    json checks = json::array();
    for (const AssertionResult& c : a.assertions) {
      checks.push_back(
          {{"name", c.name}, {"failed", !c.passed}, {"detail", c.detail}});
    }
    j["assertions"] = std::move(checks);
  }
  if (!a.printed.empty()) {
    json printed = json::array();
    for (const PrintedLine& p : a.printed) {
      printed.push_back(
          {{"stream", OutputStreamName(p.stream)}, {"text", p.text}});
    }
    j["printed"] = std::move(printed);
  }
  return j;
}

json TurnToJson(const agent::AgentTurnRecord& t) {
  json j;
  j["turn"] = t.turn;
  j["provider_requests"] = t.provider_requests;
  j["source"] = t.source;
  j["prompt_tokens"] = t.prompt_tokens;
  j["completion_tokens"] = t.completion_tokens;
  j["usd"] = t.usd;
  json calls = json::array();
  for (const agent::ToolCallRecord& c : t.tool_calls) {
    json call = {{"name", c.name},
                 {"arguments", c.arguments},
                 {"arguments_truncated", c.arguments_truncated},
                 {"result_truncated", c.result_truncated},
                 {"result_bytes", c.result_bytes},
                 {"is_error", c.is_error}};
    if (c.result) call["result"] = *c.result;
    calls.push_back(std::move(call));
  }
  j["tool_calls"] = std::move(calls);
  j["text"] = t.text;
  return j;
}

json StepRecordToJson(const StepRecord& s) {
  json j;
  j["ref"] = StepRefToJson(s.ref);
  j["outcome"] = OutcomeName(s.outcome);
  if (!s.error.empty()) j["error"] = s.error;
  if (!s.output.empty()) j["output"] = s.output;
  j["started_ms"] = ToMs(s.started);
  j["duration_ms"] = s.duration.count();
  if (!s.identity.empty()) j["identity"] = s.identity;
  if (s.cached) j["cached"] = true;
  if (!s.cached_from_run.empty()) j["cached_from_run"] = s.cached_from_run;
  if (!s.cached_from_step.empty()) j["cached_from_step"] = s.cached_from_step;
  json attempts = json::array();
  for (const AttemptRecord& a : s.attempts)
    attempts.push_back(AttemptToJson(a));
  j["attempts"] = std::move(attempts);
  if (s.agent) j["agent"] = AgentToJson(*s.agent);
  if (s.gate) j["gate"] = GateToJson(*s.gate);
  if (s.resumed) j["resumed"] = true;
  return j;
}

Result<StepRef> StepRefFromJson(const json& j) {
  return Guarded<StepRef>("step", [&] { return ReadRef(j); });
}
Result<AttemptRecord> AttemptFromJson(const json& j) {
  return Guarded<AttemptRecord>("attempt", [&] { return ReadAttempt(j); });
}
Result<agent::AgentTurnRecord> TurnFromJson(const json& j) {
  return Guarded<agent::AgentTurnRecord>("turn", [&] { return ReadTurn(j); });
}
Result<StepRecord> StepRecordFromJson(const json& j) {
  return Guarded<StepRecord>("step record", [&] { return ReadStep(j); });
}

// ---- EventWriter -----------------------------------------------------------

void EventWriter::Write(const json& event) {
  std::string line = DumpJson(event);
  // A reader of pieces (EventReader::FeedPiece) takes a piece of the full
  // size for the start of a longer line: no line is a multiple of it.
  if (line.size() % ProcessRequest::kMaxLineBytes == 0) line += ' ';
  std::lock_guard<std::mutex> lock(mu_);
  sink_(line);
}

std::optional<int64_t> EventWriter::Left(
    std::optional<SteadyTime> deadline) const {
  if (!deadline) return std::nullopt;
  return std::chrono::duration_cast<Millis>(*deadline - clock_.Now()).count();
}

void EventWriter::OnStepStart(const StepRef& step,
                              std::optional<SteadyTime> deadline) {
  json e = {{"e", "step_start"}, {"ref", StepRefToJson(step)}};
  if (auto left = Left(deadline)) e["deadline_in_ms"] = *left;
  Write(e);
}

void EventWriter::OnAttemptStart(const StepRef& step, int attempt, int of,
                                 std::optional<SteadyTime> deadline) {
  json e = {{"e", "attempt_start"},
            {"step", step.id},
            {"attempt", attempt},
            {"of", of}};
  if (auto left = Left(deadline)) e["deadline_in_ms"] = *left;
  Write(e);
}

void EventWriter::OnOutput(const StepRef& step, OutputStream stream,
                           std::string_view line) {
  Write({{"e", "output"},
         {"step", step.id},
         {"stream", OutputStreamName(stream)},
         {"line", line}});
}

void EventWriter::OnLog(const StepRef& step, std::string_view line) {
  Write({{"e", "log"}, {"step", step.id}, {"line", line}});
}

void EventWriter::OnAgentTurn(const StepRef& step,
                              const agent::AgentTurnRecord& turn) {
  Write({{"e", "turn"}, {"step", step.id}, {"turn", TurnToJson(turn)}});
}

void EventWriter::OnAttemptEnd(const StepRef& step,
                               const AttemptRecord& attempt) {
  Write({{"e", "attempt_end"},
         {"step", step.id},
         {"attempt", AttemptToJson(attempt)}});
}

void EventWriter::OnStepEnd(const StepRecord& step) {
  Write({{"e", "step_end"}, {"record", StepRecordToJson(step)}});
}

void EventWriter::WriteCellEnd(const CellEnd& end) {
  json e = {{"e", "cell_end"}, {"outcome", OutcomeName(end.outcome)}};
  if (!end.error.empty()) e["error"] = end.error;
  if (end.caused_by_error) e["caused_by_error"] = true;
  Write(e);
}

// ---- EventReader -----------------------------------------------------------

StepRef EventReader::Known(const json& event) const {
  const std::string id = Str(event, "step");
  auto it = started_.find(id);
  if (it == started_.end()) throw Bad{"step '" + id + "' has not started"};
  return it->second;
}

std::optional<SteadyTime> EventReader::Deadline(const json& event) const {
  if (Field(event, "deadline_in_ms") == nullptr) return std::nullopt;
  return clock_.Now() +
         Millis(Int(event, "deadline_in_ms", -kMaxLeftMs, kMaxLeftMs));
}

Status EventReader::Dispatch(const json& e) {
  const std::string kind = Str(e, "e");
  if (end_) throw Bad{"a line after the cell's end"};
  if (kind == "step_start") {
    const json* ref = Field(e, "ref");
    if (ref == nullptr) throw Bad{"ref is missing"};
    StepRef r = ReadRef(*ref);
    const std::optional<SteadyTime> deadline = Deadline(e);
    started_[r.id] = r;
    observer_.OnStepStart(r, deadline);
  } else if (kind == "attempt_start") {
    const StepRef r = Known(e);
    observer_.OnAttemptStart(r, SmallInt(e, "attempt", 1), SmallInt(e, "of", 1),
                             Deadline(e));
  } else if (kind == "output") {
    const StepRef r = Known(e);
    observer_.OnOutput(r, ReadStream(Str(e, "stream")), Str(e, "line"));
  } else if (kind == "log") {
    const StepRef r = Known(e);
    observer_.OnLog(r, Str(e, "line"));
  } else if (kind == "turn") {
    const StepRef r = Known(e);
    const json* t = Field(e, "turn");
    if (t == nullptr) throw Bad{"turn is missing"};
    observer_.OnAgentTurn(r, ReadTurn(*t));
  } else if (kind == "attempt_end") {
    const StepRef r = Known(e);
    const json* a = Field(e, "attempt");
    if (a == nullptr) throw Bad{"attempt is missing"};
    observer_.OnAttemptEnd(r, ReadAttempt(*a));
  } else if (kind == "step_end") {
    const json* rec = Field(e, "record");
    if (rec == nullptr) throw Bad{"record is missing"};
    // A step that never started (a cell's step not reached) ends without
    // a start, as the executor records it too.
    StepRecord s = ReadStep(*rec);
    started_.erase(s.ref.id);
    observer_.OnStepEnd(s);
  } else if (kind == "cell_end") {
    CellEnd end;
    end.outcome = ReadOutcome(e, "outcome");
    end.error = Str(e, "error");
    end.caused_by_error = Flag(e, "caused_by_error");
    end_ = std::move(end);
  } else {
    throw Bad{"'" + kind + "' is not an event"};
  }
  return Status::Ok();
}

Status EventReader::FeedPiece(std::string_view piece) {
  // The longest line read: far above any record (an agent step's turns
  // are cut to a few KB each), far below what would hurt.
  constexpr size_t kMaxLine = 256u << 20;
  if (piece.size() == ProcessRequest::kMaxLineBytes) {
    if (pending_.size() + piece.size() > kMaxLine) {
      pending_.clear();
      return InvalidArgument("event line: longer than 256 MiB");
    }
    pending_.append(piece);
    return Status::Ok();
  }
  if (pending_.empty()) return Feed(piece);
  pending_.append(piece);
  const std::string line = std::move(pending_);
  pending_.clear();
  return Feed(line);
}

Status EventReader::Feed(std::string_view line) {
  // A line is read whole before anything is called: a bad one calls
  // nothing.
  try {
    if (!JsonDepthWithin(line, 16)) throw Bad{"nested too deeply"};
    const json e = json::parse(line);
    return Dispatch(e);
  } catch (const Bad& bad) {
    return InvalidArgument("event line: " + bad.what);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("event line: ") + e.what());
  }
}

}  // namespace steps::pipeline
