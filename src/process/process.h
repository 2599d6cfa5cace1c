// The process seam: what a subprocess run asks for, how it ended, and the
// interface that runs it. The executor and the agent tools reach the OS only
// through a ProcessLauncher they are given; LocalProcessLauncher
// (process/local_launcher.h) is the one for this machine, and a cluster
// runner can implement the same interface later.
#ifndef STEPS_PROCESS_PROCESS_H_
#define STEPS_PROCESS_PROCESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/status.h"

namespace steps {

class LiveProcess;

enum class OutputStream { kStdout, kStderr };

// "stdout" or "stderr".
std::string_view OutputStreamName(OutputStream stream);

// Which part of an over-long output is kept once the cap is reached.
enum class OutputKeep {
  kHead,         // The first max bytes.
  kTail,         // The last max bytes.
  kHeadAndTail,  // Half from each end, joined by a line saying what was cut.
};

// Called once per line of output, on the thread that called Run, in the
// order the lines were read. `line` excludes the newline; a last line without
// one is delivered at the end, and a line longer than kMaxLineBytes arrives
// in pieces of that size. Must not block for long: the run waits for it.
// If it throws, the process group is killed, the child reaped, and the
// exception leaves Run.
using LineCallback = std::function<void(OutputStream, std::string_view line)>;

// Where a cluster launcher (process/slurm_launcher.h) places a run, and
// the time it gives it. A launcher for this machine ignores it.
struct ClusterPlacement {
  // Slurm's --partition, --account, --qos, --cpus-per-task, --mem, --gres;
  // empty (0 for cpus): the cluster's default.
  std::string partition;
  std::string account;
  std::string qos;
  int cpus = 0;
  std::string mem;
  std::string gres;
  // Further sbatch options, passed as given ("--constraint=avx2").
  std::vector<std::string> extra;
  // The job's name in the queue. Empty: "steps".
  std::string job_name;
  // The run's own time, counted from when it starts running on a node: the
  // time in the queue is not part of it. The request's `deadline` still
  // counts the queue. nullopt: only the deadline.
  std::optional<Millis> run_timeout;
  // The job must start on a node by then: one still in the queue leaves it
  // and the run fails to start (ClusterRun::start_by_passed). Unset: it may
  // wait in the queue until the request's deadline.
  Deadline start_by;
};

struct ProcessRequest {
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  // What to run: `command` through `bash -c` when argv is empty; otherwise
  // argv (argv[0] is looked up in the child's PATH unless it contains a '/')
  // and `command` is ignored.
  std::string command;
  std::vector<std::string> argv;

  // Directory the child starts in. Empty: the caller's own. A directory that
  // does not exist makes the run end kFailedToStart.
  std::string working_dir;

  // The child's environment: the launcher's base environment (see
  // LocalProcessLauncher) with `env` set over it and `env_unset` removed; or,
  // with inherit_env false, exactly `env`.
  bool inherit_env = true;
  std::map<std::string, std::string> env;
  std::vector<std::string> env_unset;
  // With inherit_env: when set, only these variables of the base are kept
  // (those it has), e.g. PATH and HOME for a command that must see nothing
  // else. Default: all of the base.
  std::optional<std::vector<std::string>> inherit_only;

  // Text written to the child's stdin, which is then closed. nullopt: stdin
  // reads from /dev/null.
  std::optional<std::string> stdin_text;

  // When the run must end (steady clock). At the deadline the process group
  // gets SIGTERM, and SIGKILL `kill_grace` later if anything is left; the
  // run ends kTimedOut. Default: no deadline.
  Deadline deadline;
  // Cancelling it ends the run the same way, as kCancelled. Default: a fresh
  // token nobody cancels.
  CancelToken cancel;
  // Time between SIGTERM and SIGKILL. Default: 2s.
  Millis kill_grace{2000};
  // Once the main child has exited (and its process group was killed), how
  // long to keep reading output still buffered in the pipes. Only matters
  // when a process that left the group still holds them open. Default: 500ms.
  Millis drain_timeout{500};

  // Live output, line by line. Optional.
  LineCallback on_line;
  // For a cluster launcher: where and how the run is queued. nullopt: its
  // defaults (and no run_timeout).
  std::optional<ClusterPlacement> cluster;
  // Send stderr into the stdout pipe, so both interleave in the order
  // written and stderr_text stays empty. Default: separate.
  bool merge_stderr = false;
  // Bytes kept per stream in the result (0: keep nothing); what is cut is
  // still counted and still passed to on_line. Default: 1 MiB.
  size_t max_captured_bytes = 1024 * 1024;
  OutputKeep keep = OutputKeep::kHead;

  // A request that runs `command` with bash -c.
  static ProcessRequest Shell(std::string command);
  // A request that runs argv directly.
  static ProcessRequest Exec(std::vector<std::string> argv);
};

// How a run ended. Exactly one applies; a timeout is never an exit code.
enum class ProcessEnd {
  kExited,         // The main child exited by itself: see exit_code.
  kSignaled,       // The main child died of a signal nobody here sent.
  kTimedOut,       // The request's deadline passed and the group was killed.
  kCancelled,      // The request's token was cancelled; the group was killed.
  kFailedToStart,  // Nothing ran: bad working directory, spawn error, ...
  kLost,           // The machine running it was lost: a cluster node failed
                   // or the job was preempted (see ClusterRun).
};

// "exited", "signaled", "timed out", "cancelled", "failed to start", "lost".
std::string_view ProcessEndName(ProcessEnd end);

// What one captured stream holds.
struct CapturedOutput {
  // At most max_captured_bytes (plus, for kHeadAndTail, the line saying what
  // was cut).
  std::string text;
  // Bytes the stream carried in total, kept or not.
  uint64_t total_bytes = 0;
  // True when text holds less than total_bytes.
  bool truncated = false;
};

// What a cluster launcher learnt of a run's job.
struct ClusterRun {
  // The scheduler's id for the job ("1234"); empty if it was never queued.
  std::string job_id;
  // The node it ran on; empty if it never started.
  std::string node;
  // From submission to the start on a node (to the end, if it never
  // started).
  Millis queued{0};
  // The scheduler's last word on the job: COMPLETED, TIMEOUT, NODE_FAIL,
  // PREEMPTED, CANCELLED, ...; empty when it was not asked.
  std::string state;
  // The scheduler's own time limit ended the run (kTimedOut), rather than
  // the request's deadline or run_timeout.
  bool limit_ended_it = false;
  // The job was still in the queue at the placement's start_by: it was
  // cancelled there and nothing ran (kFailedToStart).
  bool start_by_passed = false;
  // The scheduler refused the job for what it asks, or held it for a
  // reason that never passes (limits, rights, a dependency never met) and
  // it was cancelled (kFailedToStart): the same request would be refused
  // again.
  bool cannot_run = false;
};

struct ProcessResult {
  ProcessEnd end = ProcessEnd::kFailedToStart;
  // kExited: the exit status. For kTimedOut and kCancelled, how the main
  // child went down when that is known (exit_code, or term_signal), for logs.
  std::optional<int> exit_code;
  std::optional<int> term_signal;
  // kFailedToStart: why, for people ("working directory /x: No such file or
  // directory"). Empty otherwise.
  std::string error;

  CapturedOutput out;
  CapturedOutput err;

  // Process id, and so process group id, of the main child (0 if it never
  // started).
  int pid = 0;
  // Wall time from spawn to the end of the run (including drain).
  Millis duration{0};
  // True when SIGKILL had to follow SIGTERM after the grace period.
  bool escalated_to_kill = false;
  // Set by a cluster launcher.
  std::optional<ClusterRun> cluster;

  bool succeeded() const {
    return end == ProcessEnd::kExited && exit_code == 0;
  }
  // One line for logs and messages: "exited with code 3", "timed out",
  // "killed by signal 9", "failed to start: ...".
  std::string Describe() const;
};

// Runs processes to completion. Implementations are thread-safe: many runs
// may go at once from different threads.
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Blocks until the run has ended (see ProcessEnd). When it returns, the
  // main child is reaped and every process left in its group has been sent
  // SIGKILL (a process that moved to another group or session is out of
  // reach). Never throws for anything the child does.
  virtual ProcessResult Run(const ProcessRequest& request) = 0;

  // Starts the request's command to run beside the caller
  // (process/live_process.h): its stdin is a pipe whatever stdin_text says
  // (stdin_text is not written), stdout and stderr are pipes (merged when
  // merge_stderr), and deadline, cancel, on_line and the capture fields do
  // not apply: the caller reads, writes and stops it. An error says why
  // nothing started. Default: unsupported by this launcher.
  virtual Result<std::unique_ptr<LiveProcess>> Start(
      const ProcessRequest& request);
};

}  // namespace steps

#endif  // STEPS_PROCESS_PROCESS_H_
