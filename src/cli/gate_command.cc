// `steps approve RUN STEP [--reason TEXT]` and `steps reject ...`: decide a
// gate a run is waiting on, from any terminal on the same state folder.
#include <chrono>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "pipeline/executor.h"
#include "store/gates.h"
#include "store/listing.h"
#include "store/store.h"

namespace steps::cli {

Result<store::GateRow> DecideAsThisUser(const std::string& state_dir,
                                        const std::string& run,
                                        const std::string& step,
                                        pipeline::GateDecision decision,
                                        const std::string& reason,
                                        const std::string& via) {
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(state_dir));
  if (!st.ok()) return st.status();
  store::GateDecisionRequest request;
  request.run = run;
  request.step = step;
  request.decision = decision;
  request.by = pipeline::TakenBy();
  request.user = request.by.substr(0, request.by.find('@'));
  request.via = via;
  request.reason = reason;
  return store::DecideGate(**st, request, std::chrono::system_clock::now());
}

std::string DecisionReport(const store::GateRow& gate) {
  return std::string(gate.state == "approved" ? "Approved" : "Rejected") +
         " gate '" + gate.name + "' (" + gate.step_id +
         (gate.cell.empty() ? "" : ", " + gate.cell) + ") of run " +
         gate.run_id + "\n  Taken by: " + store::DecidedBy(gate) + "\n";
}

namespace {

struct DecideOptions {
  std::string run;
  std::string step;
  std::string reason;
  std::string state_dir = ".steps";
};

int RunDecide(const DecideOptions& opts, pipeline::GateDecision decision) {
  Result<store::GateRow> gate = DecideAsThisUser(
      opts.state_dir, opts.run, opts.step, decision, opts.reason, "cli");
  if (!gate.ok()) {
    std::cerr << "steps "
              << (decision == pipeline::GateDecision::kApprove ? "approve"
                                                               : "reject")
              << ": " << gate.status().message() << "\n";
    return kExitJobFailed;
  }
  std::cout << DecisionReport(*gate);
  return kExitOk;
}

Command DecideCommand(pipeline::GateDecision decision) {
  const bool approve = decision == pipeline::GateDecision::kApprove;
  return {
      approve ? "approve" : "reject",
      approve ? "Approve a gate a run is waiting on"
              : "Reject a gate a run is waiting on",
      [decision](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<DecideOptions>();
        app.add_option("run", opts->run, "Run id, or a unique prefix of one")
            ->required();
        app.add_option("step", opts->step,
                       "The gate: its step id (as `steps show` prints "
                       "it), or its name when one gate has it or only "
                       "one gate with it still waits")
            ->required();
        app.add_option("--reason", opts->reason,
                       "Why; kept with the decision (at most 2000 bytes of "
                       "text: line breaks and tabs are its only controls)");
        app.add_option("--state-dir", opts->state_dir,
                       "Where runs are recorded (STATE_DIR/steps.db)")
            ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
        app.footer(
            "The run waiting on the gate sees the decision within a "
            "quarter of a second.\n"
            "A gate with 'approvers:' takes decisions only from those OS "
            "users.\n"
            "Exit 0 when the decision was recorded; 1 when it was not "
            "(no such run\n"
            "or gate, the gate no longer waits, or you may not decide "
            "it), saying why.");
        return [opts, decision] { return RunDecide(*opts, decision); };
      }};
}

}  // namespace

Command ApproveCommand() {
  return DecideCommand(pipeline::GateDecision::kApprove);
}
Command RejectCommand() {
  return DecideCommand(pipeline::GateDecision::kReject);
}

}  // namespace steps::cli
