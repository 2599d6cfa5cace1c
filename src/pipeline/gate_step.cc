// Gate steps: put up for a decision on the executor's GateDesk, looked at
// until one is there, ended at their timeout (failing, or deciding their
// `default:`), at the job's deadline, or by an abort.
#include <algorithm>

#include "core/duration.h"
#include "core/log.h"
#include "pipeline/executor_internal.h"
#include "pipeline/template.h"

namespace steps::pipeline::internal {
namespace {

std::string DecidedBy(const GateVerdict& v) {
  if (v.via == "default") return "by its default";
  std::string by = "by " + (v.by.empty() ? std::string("somebody") : v.by);
  if (!v.via.empty()) by += " (via " + v.via + ")";
  return by;
}

// The step's result for how its gate ended.
StepResult GateResult(const Step& step, const GateVerdict& v,
                      std::optional<Millis> timeout, const std::string& job,
                      const std::string& aborted_why) {
  const std::string gate = "Gate '" + step.name + "'";
  switch (v.how) {
    case GateVerdict::How::kDecided: {
      // The error is one line: a reason's line breaks become spaces (its
      // record keeps them).
      std::string reason = v.reason.empty() ? "" : ": " + v.reason;
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      if (v.decision == GateDecision::kApprove)
        return {Outcome::kSucceeded, "", v.reason};
      if (v.via == "default") {
        return {Outcome::kFailed,
                "GATE_REJECTED: " + gate + " got no decision within " +
                    FormatDuration(timeout.value_or(Millis(0))) +
                    " and its default rejects it"};
      }
      return {Outcome::kFailed, "GATE_REJECTED: " + gate + " was rejected " +
                                    DecidedBy(v) + reason};
    }
    case GateVerdict::How::kExpired:
      return {Outcome::kFailed,
              "GATE_TIMEOUT: " + gate + " got no decision within " +
                  FormatDuration(timeout.value_or(Millis(0)))};
    case GateVerdict::How::kCut:
      return {Outcome::kFailed,
              "GATE_TIMEOUT: " + gate + " was still waiting when " + job};
    case GateVerdict::How::kAborted:
      return {Outcome::kAborted, aborted_why};
  }
  return {Outcome::kErrored, "unknown gate verdict"};
}

}  // namespace

StepResult JobRunner::RunGate(const Step& step, const Scope& scope,
                              const StepRef& ref) {
  if (std::optional<StepResult> replayed = ReplayFinished(step, ref, scope))
    return *replayed;
  StepRecord rec;
  rec.ref = ref;
  rec.started = clock_.WallNow();
  const SteadyTime start = ResumedStart(ref, rec);
  // Its own timeout, and the job's deadline, which a hook runs past.
  std::optional<Millis> timeout;
  if (step.timeout.has_value()) timeout = *step.timeout;
  const Deadline own =
      timeout ? Deadline::At(start + *timeout) : Deadline::None();
  const Deadline job = scope.in_hook ? Deadline::None() : job_deadline_;
  const Deadline until = own.Earlier(job);
  ex_.observer().OnStepStart(ref, until.when());
  ex_.observer().OnAttemptStart(ref, 1, 1, until.when());
  AttemptRecord attempt;
  attempt.started = clock_.WallNow();
  const SteadyTime attempt_start = clock_.Now();
  auto finish = [&](StepResult r) {
    attempt.outcome = r.outcome;
    attempt.error = r.error;
    attempt.output = r.output;
    attempt.duration =
        std::chrono::duration_cast<Millis>(clock_.Now() - attempt_start);
    ex_.observer().OnAttemptEnd(ref, attempt);
    rec.attempts.push_back(attempt);
    return FinishWork(rec, start, std::move(r));
  };

  GateDesk* desk = ex_.opts.gates;
  if (desk == nullptr) {
    return finish(
        {Outcome::kErrored,
         "gate '" + step.name + "' cannot run: nothing here can decide it"});
  }
  GateOpening opening;
  Result<std::string> message =
      RenderTemplateRoots(step.gate->message, scope.vars, scope.var_names);
  if (!message.ok())
    return finish({Outcome::kErrored, message.status().message()});
  opening.message = *message;
  opening.approvers = step.gate->approvers;
  opening.on_expiry = step.gate->on_expiry;
  if (until.is_set()) {
    opening.deadline =
        clock_.WallNow() + std::chrono::duration_cast<WallTime::duration>(
                               until.at() - clock_.Now());
  }
  if (Status s = desk->Open(ref, opening); !s.ok()) {
    return finish(
        {Outcome::kErrored,
         "gate '" + step.name + "' could not be opened: " + s.message()});
  }
  ex_.observer().OnGateOpen(ref, opening);
  LogEvent(LogLevel::kInfo, "gate.waiting",
           {{"step", ref.id},
            {"timeout", timeout ? FormatDuration(*timeout) : "none"}});

  GateVerdict verdict = WaitForGate(step, scope, ref, *desk, own, until);
  rec.gate = verdict;
  std::vector<LogField> ended = {
      {"step", ref.id},
      {"how", verdict.how == GateVerdict::How::kDecided
                  ? GateDecisionName(verdict.decision)
              : verdict.how == GateVerdict::How::kExpired ? "expired"
              : verdict.how == GateVerdict::How::kCut     ? "cut"
                                                          : "aborted"}};
  if (!verdict.by.empty()) ended.push_back({"by", verdict.by});
  if (!verdict.via.empty()) ended.push_back({"via", verdict.via});
  LogEvent(LogLevel::kInfo, "gate.ended", ended);
  return finish(
      GateResult(step, verdict, timeout,
                 job_.timeout.has_value() ? JobTimedOut() : "the job ended",
                 CancelledWhy(scope)));
}

GateVerdict JobRunner::WaitForGate(const Step& step, const Scope& scope,
                                   const StepRef& ref, GateDesk& desk,
                                   const Deadline& own, const Deadline& until) {
  for (;;) {
    if (std::optional<GateVerdict> v = desk.Look(ref)) return *v;
    const SteadyTime now = clock_.Now();
    if (until.is_set() && now >= until.at()) {
      GateVerdict ending;
      ending.at = clock_.WallNow();
      // The gate's own timeout decides its default; the job's deadline,
      // when it comes first, only ends the wait.
      const bool own_first = own.is_set() && own.at() <= until.at();
      if (!own_first) {
        ending.how = GateVerdict::How::kCut;
      } else if (step.gate->on_expiry) {
        ending.how = GateVerdict::How::kDecided;
        ending.decision = *step.gate->on_expiry;
        ending.via = "default";
      } else {
        ending.how = GateVerdict::How::kExpired;
      }
      return desk.Settle(ref, ending);
    }
    SteadyTime next = now + desk.LookEvery();
    if (until.is_set() && until.at() < next) next = until.at();
    if (!clock_.SleepUntil(next, scope.token)) {
      GateVerdict ending;
      ending.how = GateVerdict::How::kAborted;
      ending.at = clock_.WallNow();
      // An abort ends the run: a decision made in the same moment does not
      // bring the gate back.
      desk.Settle(ref, ending);
      return ending;
    }
  }
}

}  // namespace steps::pipeline::internal
