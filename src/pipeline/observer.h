// Reporting is an interface: the executor never prints. The terminal
// printer, the run store and the web UI are RunObservers.
#ifndef STEPS_PIPELINE_OBSERVER_H_
#define STEPS_PIPELINE_OBSERVER_H_

#include <exception>
#include <string_view>
#include <vector>

#include "core/log.h"
#include "pipeline/run_record.h"
#include "process/process.h"

namespace steps::pipeline {

// Called from the executor's threads (fan-outs run steps concurrently):
// implementations must be thread-safe and must not block for long.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void OnRunStart(const RunRecord& run) { (void)run; }
  virtual void OnJobStart(const std::string& job,
                          std::optional<SteadyTime> deadline) {
    (void)job;
    (void)deadline;
  }
  // `deadline`: when the step's own limit ends (an agent's conversation
  // deadline); nullopt when none applies.
  virtual void OnStepStart(const StepRef& step,
                           std::optional<SteadyTime> deadline) {
    (void)step;
    (void)deadline;
  }
  // `deadline`: when this attempt will be stopped, if anything stops it.
  virtual void OnAttemptStart(const StepRef& step, int attempt, int of,
                              std::optional<SteadyTime> deadline) {
    (void)step;
    (void)attempt;
    (void)of;
    (void)deadline;
  }
  virtual void OnOutput(const StepRef& step, OutputStream stream,
                        std::string_view line) {
    (void)step;
    (void)stream;
    (void)line;
  }
  // A log line about a step that is not its output: an agent's request
  // retries and fallback cascades ("WRN agent.request_retry ..."). The same
  // line also goes to the process log, so a printer may ignore it.
  virtual void OnLog(const StepRef& step, std::string_view line) {
    (void)step;
    (void)line;
  }
  virtual void OnAgentTurn(const StepRef& step,
                           const agent::AgentTurnRecord& turn) {
    (void)step;
    (void)turn;
  }
  // A durable point of an agent's conversation (agent::AgentEvents::
  // on_checkpoints): its checkpoints since the last one, in order. The
  // conversation waits until this returns, so an observer that stores them
  // has them stored before the request is sent or the tool runs. An empty
  // list is a durable point for the turns reported since the last one (a
  // cell's turns relayed from its node, which keeps its checkpoints).
  virtual void OnCheckpoints(
      const StepRef& step,
      const std::vector<agent::ConversationCheckpoint>& checkpoints) {
    (void)step;
    (void)checkpoints;
  }
  virtual void OnAttemptEnd(const StepRef& step, const AttemptRecord& attempt) {
    (void)step;
    (void)attempt;
  }
  // A gate step began to wait for a decision (after OnAttemptStart).
  virtual void OnGateOpen(const StepRef& step, const GateOpening& gate) {
    (void)step;
    (void)gate;
  }
  virtual void OnStepEnd(const StepRecord& step) { (void)step; }
  virtual void OnJobEnd(const JobRecord& job) { (void)job; }
  virtual void OnRunEnd(const RunRecord& run) { (void)run; }
};

// Forwards every event to each observer in order. The one guard at the
// observer boundary: an observer that throws is logged
// (run.observer_failed) and the others, and the run, carry on.
class ObserverList : public RunObserver {
 public:
  void Add(RunObserver* o) { observers_.push_back(o); }
  void OnRunStart(const RunRecord& run) override {
    Each("OnRunStart", [&](RunObserver* o) { o->OnRunStart(run); });
  }
  void OnJobStart(const std::string& job,
                  std::optional<SteadyTime> deadline) override {
    Each("OnJobStart", [&](RunObserver* o) { o->OnJobStart(job, deadline); });
  }
  void OnStepStart(const StepRef& s,
                   std::optional<SteadyTime> deadline) override {
    Each("OnStepStart", [&](RunObserver* o) { o->OnStepStart(s, deadline); });
  }
  void OnAttemptStart(const StepRef& s, int attempt, int of,
                      std::optional<SteadyTime> deadline) override {
    Each("OnAttemptStart",
         [&](RunObserver* o) { o->OnAttemptStart(s, attempt, of, deadline); });
  }
  void OnOutput(const StepRef& s, OutputStream stream,
                std::string_view line) override {
    Each("OnOutput", [&](RunObserver* o) { o->OnOutput(s, stream, line); });
  }
  void OnLog(const StepRef& s, std::string_view line) override {
    Each("OnLog", [&](RunObserver* o) { o->OnLog(s, line); });
  }
  void OnAgentTurn(const StepRef& s,
                   const agent::AgentTurnRecord& turn) override {
    Each("OnAgentTurn", [&](RunObserver* o) { o->OnAgentTurn(s, turn); });
  }
  void OnCheckpoints(
      const StepRef& s,
      const std::vector<agent::ConversationCheckpoint>& cps) override {
    Each("OnCheckpoints", [&](RunObserver* o) { o->OnCheckpoints(s, cps); });
  }
  void OnAttemptEnd(const StepRef& s, const AttemptRecord& a) override {
    Each("OnAttemptEnd", [&](RunObserver* o) { o->OnAttemptEnd(s, a); });
  }
  void OnGateOpen(const StepRef& s, const GateOpening& g) override {
    Each("OnGateOpen", [&](RunObserver* o) { o->OnGateOpen(s, g); });
  }
  void OnStepEnd(const StepRecord& s) override {
    Each("OnStepEnd", [&](RunObserver* o) { o->OnStepEnd(s); });
  }
  void OnJobEnd(const JobRecord& j) override {
    Each("OnJobEnd", [&](RunObserver* o) { o->OnJobEnd(j); });
  }
  void OnRunEnd(const RunRecord& r) override {
    Each("OnRunEnd", [&](RunObserver* o) { o->OnRunEnd(r); });
  }

 private:
  template <typename Call>
  void Each(const char* event, const Call& call) {
    for (auto* o : observers_) {
      try {
        call(o);
      } catch (const std::exception& e) {
        LogFailure(event, e.what());
      } catch (...) {
        LogFailure(event, "an exception that is not a std::exception");
      }
    }
  }
  static void LogFailure(const char* event, const char* what) {
    try {
      LogEvent(LogLevel::kError, "run.observer_failed",
               {{"event", event}, {"error", what}});
    } catch (...) {  // Logging must not be what ends the run either.
    }
  }

  std::vector<RunObserver*> observers_;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_OBSERVER_H_
