// The masking chokepoint between the executor and everything that shows or
// keeps a run: a RunObserver in front of the terminal printer, the run store
// and the web UI, and a StepCache in front of the store's cache. Secret
// values (core/redact.h) become "***" before any of them sees the text.
#ifndef STEPS_PIPELINE_REDACTING_H_
#define STEPS_PIPELINE_REDACTING_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/redact.h"
#include "pipeline/observer.h"
#include "pipeline/run_record.h"
#include "pipeline/step_cache.h"

namespace steps::pipeline {

// Masks, in place, every text a record carries that a step, a tool, a model
// or a provider produced: outputs, errors, answers, agent turns.
void RedactRecord(const Redactor& redactor, AttemptRecord& attempt);
void RedactRecord(const Redactor& redactor, StepRecord& step);
void RedactRecord(const Redactor& redactor, JobRecord& job);
void RedactRecord(const Redactor& redactor, RunRecord& run);

// Forwards every event to `next` with its text masked. Thread-safe when
// `next` is. With an empty redactor events pass through untouched.
class RedactingObserver : public RunObserver {
 public:
  // `next` is not owned and must outlive this observer.
  RedactingObserver(RunObserver& next,
                    std::shared_ptr<const Redactor> redactor);

  void OnRunStart(const RunRecord& run) override;
  void OnJobStart(const std::string& job,
                  std::optional<SteadyTime> deadline) override;
  void OnStepStart(const StepRef& step,
                   std::optional<SteadyTime> deadline) override;
  void OnAttemptStart(const StepRef& step, int attempt, int of,
                      std::optional<SteadyTime> deadline) override;
  void OnOutput(const StepRef& step, OutputStream stream,
                std::string_view line) override;
  void OnLog(const StepRef& step, std::string_view line) override;
  void OnCheckpoints(
      const StepRef& step,
      const std::vector<agent::ConversationCheckpoint>& checkpoints) override;
  void OnAgentTurn(const StepRef& step,
                   const agent::AgentTurnRecord& turn) override;
  void OnAttemptEnd(const StepRef& step, const AttemptRecord& attempt) override;
  void OnGateOpen(const StepRef& step, const GateOpening& gate) override;
  void OnStepEnd(const StepRecord& step) override;
  void OnJobEnd(const JobRecord& job) override;
  void OnRunEnd(const RunRecord& run) override;

 private:
  RunObserver& next_;
  const std::shared_ptr<const Redactor> redactor_;
};

// A step whose output or printed lines hold a secret is not remembered: the
// cache would have to keep the secret verbatim (or restore "***" in its
// place on a hit), so the step simply runs again next time. Lookups pass
// through (a hit's replayed lines reach the observers through the mask).
class RedactingStepCache : public StepCache {
 public:
  // `next` is not owned and must outlive this cache.
  RedactingStepCache(StepCache& next, std::shared_ptr<const Redactor> redactor);

  std::optional<CachedStep> Find(const std::string& key) override;
  void Remember(const std::string& key, const StepRef& step,
                const CachedStep& result) override;

 private:
  StepCache& next_;
  const std::shared_ptr<const Redactor> redactor_;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_REDACTING_H_
