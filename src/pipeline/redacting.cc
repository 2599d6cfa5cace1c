#include "pipeline/redacting.h"

#include <utility>

namespace steps::pipeline {
namespace {

void Mask(const Redactor& r, std::string& text) {
  if (r.Contains(text)) text = r.Redact(text);
}

void RedactTurn(const Redactor& r, agent::AgentTurnRecord& turn) {
  Mask(r, turn.source);
  Mask(r, turn.text);
  for (agent::ToolCallRecord& call : turn.tool_calls) {
    Mask(r, call.name);
    Mask(r, call.arguments);
    if (call.result) Mask(r, *call.result);
  }
}

void RedactAgent(const Redactor& r, agent::AgentResult& result) {
  Mask(r, result.answer);
  Mask(r, result.error);
  for (std::string& source : result.fallbacks_taken) Mask(r, source);
  for (agent::AgentTurnRecord& turn : result.turn_records) RedactTurn(r, turn);
}

}  // namespace

void RedactRecord(const Redactor& r, AttemptRecord& attempt) {
  Mask(r, attempt.error);
  Mask(r, attempt.output);
  for (PrintedLine& line : attempt.printed) Mask(r, line.text);
}

void RedactRecord(const Redactor& r, StepRecord& step) {
  Mask(r, step.error);
  Mask(r, step.output);
  for (AttemptRecord& a : step.attempts) RedactRecord(r, a);
  if (step.agent) RedactAgent(r, *step.agent);
  if (step.gate) Mask(r, step.gate->reason);
}

void RedactRecord(const Redactor& r, JobRecord& job) {
  Mask(r, job.error);
  for (StepRecord& s : job.steps) RedactRecord(r, s);
}

void RedactRecord(const Redactor& r, RunRecord& run) {
  for (JobRecord& j : run.jobs) RedactRecord(r, j);
}

RedactingObserver::RedactingObserver(RunObserver& next,
                                     std::shared_ptr<const Redactor> redactor)
    : next_(next), redactor_(std::move(redactor)) {}

void RedactingObserver::OnRunStart(const RunRecord& run) {
  if (redactor_->empty()) return next_.OnRunStart(run);
  RunRecord masked = run;
  RedactRecord(*redactor_, masked);
  next_.OnRunStart(masked);
}

void RedactingObserver::OnJobStart(const std::string& job,
                                   std::optional<SteadyTime> deadline) {
  next_.OnJobStart(job, deadline);
}

void RedactingObserver::OnStepStart(const StepRef& step,
                                    std::optional<SteadyTime> deadline) {
  next_.OnStepStart(step, deadline);
}

void RedactingObserver::OnAttemptStart(const StepRef& step, int attempt, int of,
                                       std::optional<SteadyTime> deadline) {
  next_.OnAttemptStart(step, attempt, of, deadline);
}

void RedactingObserver::OnOutput(const StepRef& step, OutputStream stream,
                                 std::string_view line) {
  if (!redactor_->Contains(line)) return next_.OnOutput(step, stream, line);
  next_.OnOutput(step, stream, redactor_->Redact(line));
}

void RedactingObserver::OnLog(const StepRef& step, std::string_view line) {
  if (!redactor_->Contains(line)) return next_.OnLog(step, line);
  next_.OnLog(step, redactor_->Redact(line));
}

void RedactingObserver::OnAgentTurn(const StepRef& step,
                                    const agent::AgentTurnRecord& turn) {
  if (redactor_->empty()) return next_.OnAgentTurn(step, turn);
  agent::AgentTurnRecord masked = turn;
  RedactTurn(*redactor_, masked);
  next_.OnAgentTurn(step, masked);
}

void RedactingObserver::OnCheckpoints(
    const StepRef& step,
    const std::vector<agent::ConversationCheckpoint>& checkpoints) {
  if (redactor_->empty()) return next_.OnCheckpoints(step, checkpoints);
  std::vector<agent::ConversationCheckpoint> masked = checkpoints;
  for (agent::ConversationCheckpoint& cp : masked) {
    for (Message& m : cp.messages) {
      m.content = redactor_->Redact(m.content);
      for (ToolCall& c : m.tool_calls)
        c.arguments = redactor_->Redact(c.arguments);
    }
    cp.arguments = redactor_->Redact(cp.arguments);
  }
  next_.OnCheckpoints(step, masked);
}

void RedactingObserver::OnAttemptEnd(const StepRef& step,
                                     const AttemptRecord& attempt) {
  if (redactor_->empty()) return next_.OnAttemptEnd(step, attempt);
  AttemptRecord masked = attempt;
  RedactRecord(*redactor_, masked);
  next_.OnAttemptEnd(step, masked);
}

void RedactingObserver::OnGateOpen(const StepRef& step,
                                   const GateOpening& gate) {
  if (redactor_->empty()) return next_.OnGateOpen(step, gate);
  GateOpening masked = gate;
  Mask(*redactor_, masked.message);
  next_.OnGateOpen(step, masked);
}

void RedactingObserver::OnStepEnd(const StepRecord& step) {
  if (redactor_->empty()) return next_.OnStepEnd(step);
  StepRecord masked = step;
  RedactRecord(*redactor_, masked);
  next_.OnStepEnd(masked);
}

void RedactingObserver::OnJobEnd(const JobRecord& job) {
  if (redactor_->empty()) return next_.OnJobEnd(job);
  JobRecord masked = job;
  RedactRecord(*redactor_, masked);
  next_.OnJobEnd(masked);
}

void RedactingObserver::OnRunEnd(const RunRecord& run) {
  if (redactor_->empty()) return next_.OnRunEnd(run);
  RunRecord masked = run;
  RedactRecord(*redactor_, masked);
  next_.OnRunEnd(masked);
}

RedactingStepCache::RedactingStepCache(StepCache& next,
                                       std::shared_ptr<const Redactor> redactor)
    : next_(next), redactor_(std::move(redactor)) {}

std::optional<CachedStep> RedactingStepCache::Find(const std::string& key) {
  return next_.Find(key);
}

void RedactingStepCache::Remember(const std::string& key, const StepRef& step,
                                  const CachedStep& result) {
  if (redactor_->Contains(result.output)) return;
  for (const PrintedLine& line : result.lines) {
    if (redactor_->Contains(line.text)) return;
  }
  next_.Remember(key, step, result);
}

}  // namespace steps::pipeline
