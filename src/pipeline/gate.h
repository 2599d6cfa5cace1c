// Gate steps wait for a person. The executor opens a gate on a GateDesk,
// looks at it until a decision is there or the gate's time is up, and
// settles it when it ends without one. The run store's desk
// (store/gate_desk.h) is what `steps approve` / `steps reject`, the web UI
// and the MCP server decide through; tests and `steps test` use others.
#ifndef STEPS_PIPELINE_GATE_H_
#define STEPS_PIPELINE_GATE_H_

#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "pipeline/model.h"
#include "pipeline/run_record.h"

namespace steps::pipeline {

class GateDesk {
 public:
  virtual ~GateDesk() = default;

  // Puts the gate `step` up for a decision; once this returns, a decision
  // can be made on it.
  virtual Status Open(const StepRef& step, const GateOpening& opening) = 0;

  // The decision made on the open gate `step`, once there is one.
  virtual std::optional<GateVerdict> Look(const StepRef& step) = 0;

  // Ends the gate `step` without a person's decision: `ending` is how
  // (an expiry, with its default's decision or not; the job's deadline; an
  // abort). Returns what stands: `ending`, or the decision a person made
  // just before it, which wins.
  virtual GateVerdict Settle(const StepRef& step,
                             const GateVerdict& ending) = 0;

  // How long the executor waits between two looks.
  virtual Millis LookEvery() const { return Millis(250); }
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_GATE_H_
