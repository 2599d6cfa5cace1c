// What a resumed run (`steps resume`) carries over from before its
// interruption: the steps that ended, and the time already spent. The
// executor consults it before running a step; it never reads the store.
#ifndef STEPS_PIPELINE_RESUME_STATE_H_
#define STEPS_PIPELINE_RESUME_STATE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "core/clock.h"
#include "core/duration.h"
#include "pipeline/run_record.h"

namespace steps::pipeline {

// A fix agent's run (`fix:`) inside a task's attempt that was in flight.
struct ResumedFixer {
  // It ended before the interruption: its record, replayed.
  std::optional<StepRecord> finished;
  // It was in flight with a stored conversation, which it continues.
  std::optional<agent::ResumedConversation> conversation;
  WallTime started;     // When it first started.
  Millis spent{0};      // Time the run was alive since then.
};

struct ResumeState {
  // When the run first started; the resumed run keeps it.
  WallTime run_started;
  // Leaf steps that ended (succeeded, failed or errored) before the
  // interruption, by StepRef id ("JOB:2", "JOB:2/on_failure"): they are not
  // run again. Their records are handed to observers as finished steps with
  // StepRecord::resumed set, and their outcomes count for their job as
  // before.
  std::map<std::string, StepRecord> finished;
  // Steps that were in flight, by StepRef id: when each first started.
  std::map<std::string, WallTime> step_started;
  // Their attempts that ended before the interruption, numbered 1, 2, ...:
  // those that failed or errored, and a last one that succeeded. A task,
  // get or put continues with the next number, restarting the attempt
  // that was in flight; after a succeeded one (or one whose timeout ended
  // the step) it runs none.
  std::map<std::string, std::vector<AttemptRecord>> attempts;
  // Time the run was alive since each job / in-flight step started (the
  // downtime of interruptions not counted): its deadline is its timeout
  // minus this. Empty under `--fresh-deadlines`.
  std::map<std::string, Millis> job_spent;
  std::map<std::string, Millis> step_spent;
  // When each job first started, by name.
  std::map<std::string, WallTime> job_started;
  // The conversations of agent steps in flight, by StepRef id, rebuilt from
  // their checkpoints: the step continues its conversation rather than
  // starting a new one.
  std::map<std::string, agent::ResumedConversation> conversations;
  // The fix agents that ran for each task step in flight, by the task's
  // StepRef id, in the order they ran: one per attempt that ran its fixer.
  // One past the attempts that ended with a fix belongs to the attempt in
  // flight, which resumes at it rather than running the task first.
  std::map<std::string, std::vector<ResumedFixer>> fixers;
  // What each agent step in flight had spent by its stored turns, by
  // StepRef id. A cell's step on a node starts its conversation again
  // (nothing of it is on the node): the budgets around the cell are
  // charged with this before the cell is sent.
  struct Spent {
    int64_t tokens = 0;
    double usd = 0;
  };
  std::map<std::string, Spent> in_flight_spent;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_RESUME_STATE_H_
