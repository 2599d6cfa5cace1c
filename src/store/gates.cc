#include "store/gates.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/duration.h"
#include "core/utf8.h"
#include "store/reader.h"

namespace steps::store {
namespace {

using pipeline::GateDecision;
using pipeline::GateVerdict;

int64_t ToMs(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.time_since_epoch())
      .count();
}

WallTime FromMs(int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }

const char* StateOf(const GateVerdict& v) {
  switch (v.how) {
    case GateVerdict::How::kDecided:
      return v.decision == GateDecision::kApprove ? "approved" : "rejected";
    case GateVerdict::How::kExpired:
      return "expired";
    case GateVerdict::How::kCut:
      return "cut";
    case GateVerdict::How::kAborted:
      return "aborted";
  }
  return "aborted";
}

constexpr const char* kColumns =
    "run_id, step_id, name, cell, message, approvers, opened_ms, deadline_ms,"
    " on_expiry, state, decided_by, via, reason, decided_ms";

GateRow RowOf(const Statement& s) {
  GateRow g;
  g.run_id = s.Text(0);
  g.step_id = s.Text(1);
  g.name = s.Text(2);
  g.cell = s.Text(3);
  g.message = s.Text(4);
  nlohmann::json approvers =
      nlohmann::json::parse(s.Text(5), nullptr, /*allow_exceptions=*/false);
  if (approvers.is_array()) {
    for (const nlohmann::json& a : approvers)
      if (a.is_string()) g.approvers.push_back(a.get<std::string>());
  }
  g.opened_ms = s.Int(6);
  g.deadline_ms = s.OptionalInt(7);
  g.on_expiry = s.Text(8);
  g.state = s.Text(9);
  g.decided_by = s.Text(10);
  g.via = s.Text(11);
  g.reason = s.Text(12);
  g.decided_ms = s.OptionalInt(13);
  return g;
}

// The gate's row as a verdict, once it is no longer waiting.
std::optional<GateVerdict> VerdictOf(const GateRow& g) {
  GateVerdict v;
  if (g.state == "approved" || g.state == "rejected") {
    v.how = GateVerdict::How::kDecided;
    v.decision =
        g.state == "approved" ? GateDecision::kApprove : GateDecision::kReject;
  } else if (g.state == "expired") {
    v.how = GateVerdict::How::kExpired;
  } else if (g.state == "cut") {
    v.how = GateVerdict::How::kCut;
  } else if (g.state == "aborted") {
    v.how = GateVerdict::How::kAborted;
  } else {
    return std::nullopt;
  }
  v.by = g.decided_by;
  v.via = g.via;
  v.reason = g.reason;
  v.at = FromMs(g.decided_ms.value_or(g.opened_ms));
  return v;
}

Result<std::optional<GateRow>> ReadGate(Db& db, const std::string& run_id,
                                        const std::string& step_id) {
  Result<StatementUse> st = db.Prepared(std::string("SELECT ") + kColumns +
                                        " FROM gates WHERE run_id = ?1 AND"
                                        " step_id = ?2");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, run_id);
  (*st)->Bind(2, step_id);
  Result<bool> row = (*st)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<GateRow>();
  return std::optional<GateRow>(RowOf(**st));
}

Result<std::vector<GateRow>> GatesOf(Db& db, const std::string& run_id) {
  Result<StatementUse> st =
      db.Prepared(std::string("SELECT ") + kColumns +
                  " FROM gates WHERE run_id = ?1 ORDER BY opened_ms, step_id");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, run_id);
  std::vector<GateRow> rows;
  Status s =
      (*st)->EachRow([&](const Statement& r) { rows.push_back(RowOf(r)); });
  if (!s.ok()) return s;
  return rows;
}

// Ends the gate's wait as `state`, when it still waits; whether it did.
Result<bool> EndWaiting(Db& db, const std::string& run_id,
                        const std::string& step_id, const std::string& state,
                        const std::string& by, const std::string& via,
                        const std::string& reason, int64_t at_ms) {
  Result<StatementUse> st = db.Prepared(
      "UPDATE gates SET state = ?3, decided_by = ?4, via = ?5, reason = ?6,"
      " decided_ms = ?7 WHERE run_id = ?1 AND step_id = ?2 AND state ="
      " 'waiting'");
  if (!st.ok()) return st.status();
  Statement& u = **st;
  u.Bind(1, run_id);
  u.Bind(2, step_id);
  u.Bind(3, state);
  u.Bind(4, by);
  u.Bind(5, via);
  u.Bind(6, reason);
  u.Bind(7, at_ms);
  if (Status r = u.Run(); !r.ok()) return r;
  return db.Changes() > 0;
}

std::string Label(const GateRow& g) {
  std::string label = "'" + g.name + "' (" + g.step_id;
  if (!g.cell.empty()) label += ", " + g.cell;
  return label + ")";
}

std::string HowItEnded(const GateRow& g) {
  if (g.state == "approved" || g.state == "rejected") {
    std::string how = "was already " + g.state;
    if (g.via == "default") return how + " by its default on expiry";
    if (!g.decided_by.empty()) how += " by " + g.decided_by;
    if (!g.via.empty()) how += " (via " + g.via + ")";
    return how;
  }
  if (g.state == "expired") return "has expired without a decision";
  if (g.state == "cut") return "ended at its job's deadline";
  return "ended when its run was aborted";
}

// The gate `request.step` names in `gates`.
Result<GateRow> PickGate(const std::vector<GateRow>& gates,
                         const GateDecisionRequest& request,
                         const std::string& run_id) {
  std::vector<const GateRow*> named;
  for (const GateRow& g : gates) {
    if (g.step_id == request.step) return g;
    if (g.name == request.step) named.push_back(&g);
  }
  if (named.size() == 1) return *named[0];
  if (named.empty()) {
    std::string known;
    for (const GateRow& g : gates)
      known += (known.empty() ? "" : ", ") + Label(g);
    return NotFound(
        "run " + run_id + " has no gate '" + request.step + "'" +
        (known.empty() ? " (it has opened none)" : "; its gates: " + known));
  }
  // Several of that name (the cells of an across): one waiting is enough.
  std::vector<const GateRow*> waiting;
  for (const GateRow* g : named)
    if (g->state == "waiting") waiting.push_back(g);
  if (waiting.size() == 1) return *waiting[0];
  std::string ids;
  for (const GateRow* g : waiting.empty() ? named : waiting)
    ids += (ids.empty() ? "" : ", ") + Label(*g);
  return InvalidArgument(
      "run " + run_id + " has " +
      std::to_string(waiting.empty() ? named.size() : waiting.size()) +
      " gates named '" + request.step + "'; name one by its step id: " + ids);
}

Status MayDecide(const GateRow& g, const GateDecisionRequest& request) {
  if (g.approvers.empty()) return Status::Ok();
  std::string names;
  for (const std::string& a : g.approvers)
    names += (names.empty() ? "" : ", ") + a;
  if (request.user.empty()) {
    const std::string channel =
        request.via == "ui" ? "the web UI" : "'" + request.via + "'";
    return InvalidArgument(
        "gate " + Label(g) + " names its approvers (" + names + "), and " +
        channel +
        " cannot tell who you are: decide it as one of them from "
        "a terminal, `steps " +
        (request.decision == GateDecision::kApprove ? "approve" : "reject") +
        " " + g.run_id + " " + g.step_id + "`");
  }
  if (std::find(g.approvers.begin(), g.approvers.end(), request.user) ==
      g.approvers.end()) {
    return InvalidArgument("gate " + Label(g) + " may be decided only by " +
                           names + "; you are " + request.user);
  }
  return Status::Ok();
}

}  // namespace

StoreGateDesk::StoreGateDesk(Store& store, std::string run_id, Clock& clock)
    : store_(store), run_id_(std::move(run_id)), clock_(clock) {}

Status StoreGateDesk::Open(const pipeline::StepRef& step,
                           const pipeline::GateOpening& opening) {
  nlohmann::json approvers = opening.approvers;
  const std::string on_expiry =
      opening.on_expiry ? pipeline::GateDecisionName(*opening.on_expiry) : "";
  std::optional<int64_t> deadline;
  if (opening.deadline) deadline = ToMs(*opening.deadline);
  const int64_t now = ToMs(clock_.WallNow());
  return store_.Write([&](Db& db) -> Status {
    // A resumed run opens its gate again: a decision made while it was
    // down stands; an ending of its earlier life (its abort) does not.
    Result<StatementUse> st = db.Prepared(
        "INSERT INTO gates (run_id, step_id, name, cell, message, approvers,"
        " opened_ms, deadline_ms, on_expiry, state) VALUES (?1, ?2, ?3, ?4,"
        " ?5, ?6, ?7, ?8, ?9, 'waiting') ON CONFLICT (run_id, step_id) DO"
        " UPDATE SET message = ?5, approvers = ?6, deadline_ms = ?8,"
        " on_expiry = ?9, state = CASE WHEN state IN ('approved', 'rejected')"
        " AND via != 'default' THEN state ELSE 'waiting' END, decided_by ="
        " CASE WHEN state IN ('approved', 'rejected') AND via != 'default'"
        " THEN decided_by ELSE '' END, via = CASE WHEN state IN ('approved',"
        " 'rejected') AND via != 'default' THEN via ELSE '' END");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, run_id_);
    s.Bind(2, step.id);
    s.Bind(3, step.name);
    s.Bind(4, step.cell);
    s.Bind(5, opening.message);
    s.Bind(6, approvers.dump());
    s.Bind(7, now);
    s.Bind(8, deadline);
    s.Bind(9, on_expiry);
    return s.Run();
  });
}

std::optional<pipeline::GateVerdict> StoreGateDesk::Look(
    const pipeline::StepRef& step) {
  std::optional<GateRow> row;
  Status s = store_.ReadCommitted([&](Db& db) -> Status {
    Result<std::optional<GateRow>> r = ReadGate(db, run_id_, step.id);
    if (!r.ok()) return r.status();
    row = *r;
    return Status::Ok();
  });
  // A read that fails (a busy store) is a look that saw nothing yet.
  if (!s.ok() || !row) return std::nullopt;
  return VerdictOf(*row);
}

pipeline::GateVerdict StoreGateDesk::Settle(
    const pipeline::StepRef& step, const pipeline::GateVerdict& ending) {
  std::optional<GateRow> stands;
  Status s = store_.Write([&](Db& db) -> Status {
    Result<bool> ended = EndWaiting(db, run_id_, step.id, StateOf(ending),
                                    ending.by, ending.via, ending.reason,
                                    ToMs(ending.at));
    if (!ended.ok()) return ended.status();
    if (*ended) return Status::Ok();
    // Not waiting any more: somebody decided it first.
    Result<std::optional<GateRow>> row = ReadGate(db, run_id_, step.id);
    if (!row.ok()) return row.status();
    stands = *row;
    return Status::Ok();
  });
  if (!s.ok()) store_.WarnWriteFailed(s);
  if (stands) {
    if (std::optional<GateVerdict> v = VerdictOf(*stands)) return *v;
  }
  return ending;
}

Status CheckGateReason(const std::string& reason) {
  if (!IsValidUtf8(reason)) {
    return InvalidArgument("the reason is not valid UTF-8 text");
  }
  if (reason.size() > kMaxGateReasonBytes) {
    return InvalidArgument("the reason is " + std::to_string(reason.size()) +
                           " bytes long; a decision keeps at most " +
                           std::to_string(kMaxGateReasonBytes) +
                           ": shorten it");
  }
  for (size_t i = 0; i < reason.size(); ++i) {
    // C0 controls and DEL, and C1 controls, but line breaks and tabs.
    if (ControlCharacterAt(reason, i) > 0 && reason[i] != '\n' &&
        reason[i] != '\t') {
      return InvalidArgument(
          "the reason holds a control character at byte " + std::to_string(i) +
          "; a reason is text: line breaks and tabs are its only controls");
    }
  }
  return Status::Ok();
}

Result<GateRow> DecideGate(Store& store, const GateDecisionRequest& request,
                           WallTime now, GateRefusal* refusal) {
  if (Status r = CheckGateReason(request.reason); !r.ok()) {
    if (refusal) *refusal = GateRefusal::kBadReason;
    return r;
  }
  GateRefusal why = GateRefusal::kNone;
  // A name that fits no run or gate, or several.
  auto naming = [&why](const Status& s) {
    if (s.code() == StatusCode::kNotFound) why = GateRefusal::kUnknown;
    if (s.code() == StatusCode::kInvalidArgument) why = GateRefusal::kAmbiguous;
    return s;
  };
  GateRow decided;
  Status s = store.Write([&](Db& db) -> Status {
    Result<std::string> run_id = ResolveRunId(db, request.run);
    if (!run_id.ok()) return naming(run_id.status());
    Result<std::vector<GateRow>> gates = GatesOf(db, *run_id);
    if (!gates.ok()) return gates.status();
    Result<GateRow> gate = PickGate(*gates, request, *run_id);
    if (!gate.ok()) return naming(gate.status());
    if (Status may = MayDecide(*gate, request); !may.ok()) {
      why = GateRefusal::kNotApprover;
      return may;
    }
    if (gate->state != "waiting") {
      why = GateRefusal::kNotWaiting;
      return InvalidArgument("gate " + Label(*gate) + " of run " + *run_id +
                             " " + HowItEnded(*gate));
    }
    // Its run settles it within moments of its deadline (expired, its
    // default, or the job's deadline): a decision made later is too late,
    // even when the run has not written that down yet.
    if (gate->deadline_ms && ToMs(now) >= *gate->deadline_ms) {
      why = GateRefusal::kNotWaiting;
      const Millis late(ToMs(now) - *gate->deadline_ms);
      return InvalidArgument("gate " + Label(*gate) + " of run " + *run_id +
                             " is past its deadline" +
                             (late >= std::chrono::seconds(1)
                                  ? " by " + FormatDuration(late)
                                  : "") +
                             "; its expiry decides it");
    }
    Result<bool> ended = EndWaiting(
        db, *run_id, gate->step_id,
        request.decision == GateDecision::kApprove ? "approved" : "rejected",
        request.by, request.via, request.reason, ToMs(now));
    if (!ended.ok()) return ended.status();
    Result<std::optional<GateRow>> row = ReadGate(db, *run_id, gate->step_id);
    if (!row.ok()) return row.status();
    if (!*row) return Internal("the gate's row went away");
    decided = **row;
    return Status::Ok();
  });
  if (refusal) *refusal = s.ok() ? GateRefusal::kNone : why;
  if (!s.ok()) return s;
  return decided;
}

Result<std::vector<GateRow>> ReadGates(Db& db, const std::string& run_id) {
  return GatesOf(db, run_id);
}

std::string DecidedBy(const GateRow& gate) {
  if (gate.decided_by.empty() || gate.via == "default") return "";
  return gate.via.empty() ? gate.decided_by
                          : gate.decided_by + " (via " + gate.via + ")";
}

Result<std::vector<GateRow>> ListGates(Store& store,
                                       const std::string& run_id) {
  std::vector<GateRow> rows;
  Status s = store.ReadCommitted([&](Db& db) -> Status {
    Result<std::vector<GateRow>> r = GatesOf(db, run_id);
    if (!r.ok()) return r.status();
    rows = std::move(*r);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return rows;
}

}  // namespace steps::store
