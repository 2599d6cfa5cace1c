// Reading runs back from the store, for `steps show`, `steps runs` and the
// web UI. A run whose row still says "running" but whose process is gone
// (killed, or the machine restarted) reads as "interrupted", and so do its
// unfinished jobs, steps and attempts.
#ifndef STEPS_STORE_READER_H_
#define STEPS_STORE_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "core/status.h"
#include "store/plan_outline.h"
#include "store/gates.h"
#include "store/store.h"

namespace steps::store {

// Times are milliseconds since the epoch; durations milliseconds. A status
// is an outcome ("succeeded", "failed", "errored", "aborted"), "running"
// or "interrupted".
struct StoredAttempt {
  int number = 1;
  int of = 1;
  std::string status;
  int64_t started_ms = 0;
  std::optional<int64_t> duration_ms;
  std::optional<int64_t> deadline_ms;
  std::string identity;
  std::optional<int64_t> exit_code;
  bool timed_out = false;
  std::optional<int64_t> clipped_to_ms;
  std::string exhausted_by;
  std::string error;
  std::string output;
  bool fixed = false;
  std::string taken_by;
  // Run by Slurm: its job, and its time in the queue.
  std::optional<std::string> slurm_job;
  std::optional<int64_t> queued_ms;
};

struct StoredTurn {
  int turn = 0;
  int provider_requests = 0;
  std::string source;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
  // Recorded before calls kept their results: name and arguments only, the
  // arguments cut at 300 bytes.
  std::vector<agent::ToolCallRecord> tool_calls;
  std::string text;
  std::optional<int64_t> at_ms;  // When its answer arrived; unset before v3.
};

// An agent conversation's totals (set once the step ended).
struct StoredAgent {
  int turns = 0;
  int provider_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
  bool nudge_sent = false;
  bool deadline_disclosed = false;
  std::vector<std::string> fallbacks_taken;
  int retries = 0;           // Requests that were retries.
  int retries_denied = 0;    // Retries the retry budget refused.
  int64_t rate_wait_ms = 0;  // Waiting for rate limits and open circuits.
};

struct StoredStep {
  std::string id;  // Unique in the run ("JOB:2", "JOB:2/fix~2").
  std::string job;
  std::string name;
  std::string cell;  // An across cell's values, "os=linux"; else empty.
  std::string kind;  // "task", "get", "put", "agent".
  std::string hook;  // "on_failure", ...; empty for a step that is not one.
  bool fixer = false;
  bool judge = false;  // An assert judge's run: its id ends in "/judge".
  int line = 0;
  std::string status;
  std::string error;
  std::string output;
  int64_t started_ms = 0;
  std::optional<int64_t> duration_ms;
  std::optional<int64_t> deadline_ms;
  std::string identity;  // The cache key (hex).
  bool cached = false;
  // For a cached step: the run and step whose result it reused, when the
  // entry is still there.
  std::string cached_from_run;
  std::string cached_from_step;
  std::optional<StoredAgent> agent;
  std::optional<int64_t> nudge_ms;  // When an agent's nudge was sent.
  // Output and log lines stored so far (see LoadStepLog); at most
  // RunRecorder::kMaxOutputLines.
  int64_t log_lines = 0;
  std::vector<StoredTurn> turns;
  std::vector<StoredAttempt> attempts;
  std::optional<GateRow> gate;  // A gate step's, once it opened.
};

// What something spent: tokens and dollars, added up from its parts.
struct StoredSpend {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;

  void Add(const StoredSpend& o) {
    prompt_tokens += o.prompt_tokens;
    completion_tokens += o.completion_tokens;
    usd += o.usd;
  }
};

// A step's spend: its totals once it ended, else its turns so far (as the
// run's sum in the store reads it). A cached step spent nothing.
StoredSpend StepSpend(const StoredStep& s);

struct StoredJob {
  std::string name;
  std::string status;
  std::string error;
  bool caused_by_error = false;
  std::vector<std::string> execution;
  int64_t started_ms = 0;
  std::optional<int64_t> duration_ms;
  std::optional<int64_t> deadline_ms;
  // In the order they finished; unfinished ones after, in start order.
  std::vector<StoredStep> steps;
};

// One interruption of a resumed run (`steps resume`).
struct StoredInterruption {
  int number = 1;
  std::string status;   // How the run had stopped: "interrupted", "aborted".
  int64_t died_ms = 0;  // The latest time its records held.
  int64_t resumed_ms = 0;
  std::string taken_by;  // Who resumed it.
};

struct StoredRun {
  std::string id;
  std::string file;
  std::string status;
  int64_t started_ms = 0;
  std::optional<int64_t> duration_ms;
  std::string taken_by;
  std::string host;
  int64_t pid = 0;
  // What its agent steps spent (cached steps spend nothing), a running
  // step's turns so far included.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
  std::vector<StoredJob> jobs;  // Empty in ListRuns.
  // The outline of its plan as it started; empty in ListRuns, and for runs
  // recorded before the store kept it.
  std::vector<PlannedJob> plan;
  // Each time it stopped early and was resumed, in order; empty in
  // ListRuns.
  std::vector<StoredInterruption> interruptions;
};

// Runs, newest first; at most `limit` (0: all). Jobs are not loaded.
Result<std::vector<StoredRun>> ListRuns(Store& store, int limit = 0);

// The id of run `id` (a run id or a unique prefix of one; empty: the
// newest run). NotFound when there is none; InvalidArgument when the
// prefix names more than one.
Result<std::string> ResolveRunId(Db& db, const std::string& id);

// One run with its jobs, steps, attempts and agent turns. `id` is a run id,
// a unique prefix of one, or empty for the newest run. NotFound when there
// is no such run (or none at all).
Result<StoredRun> LoadRun(Store& store, const std::string& id);

// The interruptions of run `run_id` (exact id), in order.
Result<std::vector<StoredInterruption>> ReadInterruptions(
    Db& db, const std::string& run_id);

// One line a step wrote: its stdout or stderr, or a log line about it
// ("log": an agent's request retries, its fallback cascades).
struct StoredLine {
  int64_t seq = 0;     // 1, 2, ... in the order written.
  std::string stream;  // "stdout", "stderr" or "log".
  std::string text;
};

struct StoredLog {
  std::string run_id;  // Resolved from the prefix asked for.
  std::string step_id;
  std::vector<StoredLine> lines;  // seq > after, in order, at most `limit`.
  int64_t last_seq = 0;           // The highest seq stored so far.
};

// The lines of step `step_id` of run `run_id` (a run id, a unique prefix,
// or empty for the newest run) after line `after_seq`, at most `limit` of
// them (0: all). NotFound when there is no such run or step.
Result<StoredLog> LoadStepLog(Store& store, const std::string& run_id,
                              const std::string& step_id, int64_t after_seq,
                              int limit);

// Whether the process that wrote a "running" row of run `run_id` is still
// that run. On this host: a live process with the same pid and start time.
// Another host's process cannot be checked: its run lock in `state_dir`
// decides (held over a shared folder by a live run; free in a folder
// restored from a dead runner's cache), and without a lock file the run
// counts as alive.
bool RunProcessAlive(const std::string& state_dir, const std::string& run_id,
                     const std::string& host, int64_t pid,
                     const std::string& pid_start);

}  // namespace steps::store

#endif  // STEPS_STORE_READER_H_
