// Gate steps in the run store: the desk a run puts its gates up on
// (StoreGateDesk), and the decisions people make on them from another
// process (`steps approve` / `steps reject`, the web UI, the MCP server):
// DecideGate. A gate's row is its whole story: waiting, then approved,
// rejected, expired, cut (the job's deadline) or aborted, with who decided,
// through what, why and when.
#ifndef STEPS_STORE_GATES_H_
#define STEPS_STORE_GATES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "pipeline/gate.h"
#include "store/store.h"

namespace steps::store {

struct GateRow {
  std::string run_id;
  std::string step_id;
  std::string name;
  std::string cell;  // "env=prod" in an across cell; else empty.
  std::string message;
  std::vector<std::string> approvers;  // Empty: anyone.
  int64_t opened_ms = 0;
  std::optional<int64_t> deadline_ms;
  std::string on_expiry;  // "", "approve" or "reject".
  // "waiting", "approved", "rejected", "expired", "cut" or "aborted".
  std::string state;
  std::string decided_by;  // user@host; empty for a default.
  std::string via;         // cli, ui, mcp, mock or default.
  std::string reason;
  std::optional<int64_t> decided_ms;
};

// The desk of one run: gates are rows of the run store, looked at with a
// read of what is committed (another process's decision included).
class StoreGateDesk : public pipeline::GateDesk {
 public:
  // `store` and `clock` must outlive the desk.
  StoreGateDesk(Store& store, std::string run_id, Clock& clock = RealClock());

  // Writes the gate's row, waiting. A gate of a resumed run that was
  // decided while the run was down keeps that decision.
  Status Open(const pipeline::StepRef& step,
              const pipeline::GateOpening& opening) override;
  std::optional<pipeline::GateVerdict> Look(
      const pipeline::StepRef& step) override;
  pipeline::GateVerdict Settle(const pipeline::StepRef& step,
                               const pipeline::GateVerdict& ending) override;

 private:
  Store& store_;
  const std::string run_id_;
  Clock& clock_;
};

// A person's decision on a waiting gate.
struct GateDecisionRequest {
  std::string run;   // A run id or a unique prefix of one.
  std::string step;  // The gate's step id ("deploy:2"), or its name when
                     // one gate of the run has it, or only one of the
                     // gates with it still waits.
  pipeline::GateDecision decision = pipeline::GateDecision::kReject;
  std::string by;  // Who decides, user@host.
  // The OS user deciding, checked against the gate's approvers; empty for
  // a channel that cannot tell (the web UI), which a gate with approvers
  // refuses.
  std::string user;
  std::string via;  // "cli", "ui" or "mcp".
  std::string reason;
};

// The longest reason a decision takes, in bytes of UTF-8.
inline constexpr size_t kMaxGateReasonBytes = 2000;

// Why a decision's reason cannot be kept, or Ok: it is UTF-8 text of at
// most kMaxGateReasonBytes, without control characters but line breaks and
// tabs (no escape sequence reaches a terminal that shows it).
Status CheckGateReason(const std::string& reason);

// Why DecideGate did not record a decision, for a caller that answers each
// case its own way (the web UI's HTTP statuses).
enum class GateRefusal {
  kNone,         // Recorded, or the store failed (see the status).
  kUnknown,      // No such run, or the run has no such gate.
  kAmbiguous,    // The name fits several gates.
  kNotApprover,  // The gate names approvers and the user is not one of
                 // them, or cannot be told.
  kNotWaiting,   // The gate has ended already, or its deadline has
                 // passed (its expiry decides it).
  kBadReason,    // The reason fails CheckGateReason.
};

// Records `request` on its gate when the gate is waiting and the user may
// decide it; returns the gate as decided. NotFound for an unknown run or
// gate; InvalidArgument when the reason cannot be kept, when the name fits
// several gates, when the gate is no longer waiting (saying how it ended)
// or its deadline is past `now`, or when the user is not one of its
// approvers. `refusal`, when given, is set to which of these it was.
Result<GateRow> DecideGate(Store& store, const GateDecisionRequest& request,
                           WallTime now, GateRefusal* refusal = nullptr);

// The gates of run `run_id` (exact id), in the order they opened.
Result<std::vector<GateRow>> ListGates(Store& store, const std::string& run_id);
// The same within a read the caller holds.
Result<std::vector<GateRow>> ReadGates(Db& db, const std::string& run_id);

// "user@host (via cli)" of a person's decision, in the `Taken by:` grammar;
// empty when nobody decided (a default, an expiry, the job's deadline).
std::string DecidedBy(const GateRow& gate);

}  // namespace steps::store

#endif  // STEPS_STORE_GATES_H_
