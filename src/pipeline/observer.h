// Reporting is an interface: the executor never prints. The terminal
// printer, the run store and the web UI are RunObservers.
#ifndef STEPS_PIPELINE_OBSERVER_H_
#define STEPS_PIPELINE_OBSERVER_H_

#include <string_view>
#include <vector>

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
  virtual void OnAttemptEnd(const StepRef& step, const AttemptRecord& attempt) {
    (void)step;
    (void)attempt;
  }
  virtual void OnStepEnd(const StepRecord& step) { (void)step; }
  virtual void OnJobEnd(const JobRecord& job) { (void)job; }
  virtual void OnRunEnd(const RunRecord& run) { (void)run; }
};

// Forwards every event to each observer in order.
class ObserverList : public RunObserver {
 public:
  void Add(RunObserver* o) { observers_.push_back(o); }
  void OnRunStart(const RunRecord& run) override {
    for (auto* o : observers_) o->OnRunStart(run);
  }
  void OnJobStart(const std::string& job,
                  std::optional<SteadyTime> deadline) override {
    for (auto* o : observers_) o->OnJobStart(job, deadline);
  }
  void OnStepStart(const StepRef& s,
                   std::optional<SteadyTime> deadline) override {
    for (auto* o : observers_) o->OnStepStart(s, deadline);
  }
  void OnAttemptStart(const StepRef& s, int attempt, int of,
                      std::optional<SteadyTime> deadline) override {
    for (auto* o : observers_) o->OnAttemptStart(s, attempt, of, deadline);
  }
  void OnOutput(const StepRef& s, OutputStream stream,
                std::string_view line) override {
    for (auto* o : observers_) o->OnOutput(s, stream, line);
  }
  void OnLog(const StepRef& s, std::string_view line) override {
    for (auto* o : observers_) o->OnLog(s, line);
  }
  void OnAgentTurn(const StepRef& s,
                   const agent::AgentTurnRecord& turn) override {
    for (auto* o : observers_) o->OnAgentTurn(s, turn);
  }
  void OnAttemptEnd(const StepRef& s, const AttemptRecord& a) override {
    for (auto* o : observers_) o->OnAttemptEnd(s, a);
  }
  void OnStepEnd(const StepRecord& s) override {
    for (auto* o : observers_) o->OnStepEnd(s);
  }
  void OnJobEnd(const JobRecord& j) override {
    for (auto* o : observers_) o->OnJobEnd(j);
  }
  void OnRunEnd(const RunRecord& r) override {
    for (auto* o : observers_) o->OnRunEnd(r);
  }

 private:
  std::vector<RunObserver*> observers_;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_OBSERVER_H_
