// What a run leaves behind: one record per run, job, step and attempt. The
// executor fills these and hands them to its RunObserver; the terminal
// printer, the run store and the web UI read them.
#ifndef STEPS_PIPELINE_RUN_RECORD_H_
#define STEPS_PIPELINE_RUN_RECORD_H_

#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/outcome.h"
#include "pipeline/model.h"
#include "process/process.h"

namespace steps::pipeline {

// One line a step printed, as the observers saw it.
struct PrintedLine {
  OutputStream stream = OutputStream::kStdout;
  std::string text;
};

// One check of a step's `assert:` judged on one result.
struct AssertionResult {
  // The check, as a row label: "contains_all", "tool_called read_file",
  // "judge".
  std::string name;
  bool passed = true;
  std::string detail;  // Why it missed; "" when it passed.
};

// What Slurm did with an attempt's job.
struct SlurmAttempt {
  std::string job_id;  // "1234".
  std::string node;    // Where it ran; empty if it never started.
  Millis queued{0};    // From submission to the start on the node.
};

struct AttemptRecord {
  int number = 1;  // 1-based.
  int of = 1;      // The step's resolved attempts.
  Outcome outcome = Outcome::kSucceeded;
  WallTime started;
  Millis duration{0};
  std::optional<int> exit_code;
  bool timed_out = false;
  // Set when retry.total_timeout_seconds cut this attempt short: the time it
  // was given instead of its own timeout.
  std::optional<Millis> clipped_to;
  // "total_timeout" on the last attempt when the cap ended the retries.
  std::string exhausted_by;
  std::string error;   // Why the attempt did not succeed.
  std::string output;  // Its stdout, bounded.
  bool fixed = false;  // A fixer ran and this is the re-run's result.
  // Run by Slurm (runner: slurm): the last job of the attempt.
  std::optional<SlurmAttempt> slurm;
  // Its node failed or its job was preempted (errored; retried only with
  // slurm.retry_lost).
  bool lost = false;
  // Another attempt could not fare otherwise (Slurm cannot run its job as
  // asked): the step's attempts end with this one. Not stored.
  bool final = false;
  // The step's identity (StepRecord::identity) as the attempt ran.
  std::string identity;
  // Each check of the step's assert on this attempt's result, when it was
  // judged (an attempt that failed before, e.g. by its exit code, has none).
  std::vector<AssertionResult> assertions;
  // What the attempt printed, kept only for the step cache to replay (a
  // cacheable task under a cache; at most kMaxCachedLines).
  std::vector<PrintedLine> printed;
};

// Identifies a step while it runs (for observers).
struct StepRef {
  std::string id;  // Unique in the run: "JOB/2", "JOB/3.1", "JOB/2/on_failure".
  std::string job;
  std::string name;  // As in `execution:` lists.
  StepKind kind = StepKind::kTask;
  std::optional<HookKind> hook;  // Set for hook steps.
  bool fixer = false;            // A `fix:` agent run.
  bool judge = false;            // An `assert: {judge}` agent run.
  // The agent entry an agent step, fixer or judge talks to; empty for
  // other steps. (A step's `name:` may differ from it.)
  std::string agent;
  int line = 0;
  // In an across cell: the cell's values, "os=linux arch=arm"; else empty.
  std::string cell;
  // Served from the step cache: nothing of it runs, so none of its events
  // is a durable point (its records ride with its end).
  bool replayed = false;
};

// How a gate ended. A person's decision says who, through what and why;
// an expiry with `default:` says "default"; the others decide nothing.
struct GateVerdict {
  enum class How {
    kDecided,  // By a person (or a mock block), or by `default:` on expiry.
    kExpired,  // Its timeout passed without a decision and no default.
    kCut,      // The job's deadline passed while it waited.
    kAborted,  // The run was aborted while it waited.
  };
  How how = How::kDecided;
  GateDecision decision = GateDecision::kReject;  // kDecided only.
  std::string by;      // "user@host"; empty for a default.
  std::string via;     // "cli", "ui", "mcp", "mock", or "default".
  std::string reason;  // What the decider said; may be empty.
  WallTime at{};
};

// What a waiting gate shows whoever may decide it.
struct GateOpening {
  std::string message;                 // Rendered.
  std::vector<std::string> approvers;  // Empty: anyone.
  std::optional<WallTime> deadline;    // When it stops waiting, if ever.
  std::optional<GateDecision> on_expiry;
};

struct StepRecord {
  StepRef ref;
  Outcome outcome = Outcome::kSucceeded;
  std::string error;
  std::string output;  // Final stdout (trimmed), the answer of an agent.
  WallTime started;
  Millis duration{0};
  std::string identity;  // Cache key (hex); empty for blocks.
  bool cached = false;
  // A cached step: the run and step ("JOB:2") whose result it reused.
  std::string cached_from_run;
  std::string cached_from_step;
  std::vector<AttemptRecord> attempts;
  std::optional<agent::AgentResult> agent;  // Agent steps.
  std::optional<GateVerdict> gate;          // Gate steps that ended.
  // Ended before the run was interrupted and resumed: this record is the
  // stored one, replayed; the step did not run again.
  bool resumed = false;
};

// How an across cell run by itself ended (Executor::RunCell; the last
// line of its event stream, event_stream.h).
struct CellEnd {
  Outcome outcome = Outcome::kSucceeded;
  std::string error;
  bool caused_by_error = false;  // Failed because a step errored.
  // The cell never started on a node: it was still queued when the job's
  // deadline (CellTask::job_deadline, the placement's start_by) passed.
  bool queued_past_job_deadline = false;
};

struct JobRecord {
  std::string name;
  Outcome outcome = Outcome::kSucceeded;
  std::string error;
  // True when the job failed because a step errored (exit code 2).
  bool caused_by_error = false;
  // Names of steps, hooks and fix agents in the order they finished.
  std::vector<std::string> execution;
  WallTime started;
  Millis duration{0};
  std::vector<StepRecord> steps;  // In the order they finished.
};

struct RunRecord {
  std::string id;
  std::string file;
  Outcome outcome = Outcome::kSucceeded;
  WallTime started;
  Millis duration{0};
  std::vector<JobRecord> jobs;
  std::string taken_by;  // user@host
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_RUN_RECORD_H_
