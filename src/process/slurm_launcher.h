// SlurmLauncher: runs each request as one Slurm batch job (docs/slurm.md).
#ifndef STEPS_PROCESS_SLURM_LAUNCHER_H_
#define STEPS_PROCESS_SLURM_LAUNCHER_H_

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/duration.h"
#include "core/fiber.h"
#include "core/status.h"
#include "process/process.h"
#include "process/slurm_poll.h"

namespace steps {

// Told when a job is queued and when it has ended, e.g. to record it so
// that a later process can cancel it if this one dies first. Called on the
// thread that called Run; must not throw.
class SlurmJobObserver {
 public:
  virtual ~SlurmJobObserver() = default;
  // sbatch is about to run: from now on a job may exist whose id nobody
  // knows yet (SlurmLauncherOptions::tag finds it).
  virtual void OnSubmitting() {}
  // sbatch answered with the job's id; nothing waits on the job yet.
  virtual void OnJobQueued(const std::string& job_id) = 0;
  // The job has ended (or was cancelled and Slurm let go of it).
  virtual void OnJobEnded(const std::string& job_id) = 0;
};

struct SlurmLauncherOptions {
  // A folder every node sees at the same path (a shared filesystem): each
  // run keeps its job script, output files and end markers in a folder of
  // its own under it, removed when the run ends. Required.
  std::string spool_dir;
  // The Slurm commands, looked up in PATH unless they hold a '/'.
  std::string sbatch = "sbatch";
  std::string scancel = "scancel";
  std::string scontrol = "scontrol";
  std::string squeue = "squeue";
  // How often the job's output files are read while it runs; the first
  // reads come sooner (a short job ends within a few of them).
  Millis output_poll{50};
  // How often Slurm is asked how the jobs stand, to see an end no file
  // tells of (its time limit, a failed node, preemption, scancel): one
  // squeue for all of the launcher's jobs (SlurmStatePoll).
  Millis state_poll{1000};
  // Told about every job. Must outlive the launcher. Default: nobody.
  SlurmJobObserver* jobs = nullptr;
  // Each job's comment (sbatch --comment), by which CancelTaggedSlurmJobs
  // finds the jobs of a process that died before sbatch named them
  // (SlurmRunTag). Empty: no comment.
  std::string tag;
};

// The tag of a run's jobs: "steps-run:RUN_ID".
std::string SlurmRunTag(const std::string& run_id);

// Cancels this user's jobs whose comment is `tag` (squeue, then scancel;
// each given at most 30 s). For the jobs a dead run left.
void CancelTaggedSlurmJobs(const std::string& tag);

// Each Run submits one job with sbatch, whose script runs the request's
// command on a node: in its working directory, with the request's
// environment (sbatch exports its own, which is the request's), stdin from
// stdin_text or /dev/null, stdout and stderr into files of the run's spool
// folder. While the job runs those files are read and their lines handed to
// on_line, so output streams back live; the captured text is bounded as a
// local run's is.
//
// Time: the request's deadline counts from submission (the queue included);
// placement.run_timeout counts from the start on a node. The job's Slurm
// time limit (--time) is the shorter of the two as known at submission,
// rounded up to whole minutes: a backstop that ends the job even if this
// process is gone. Whichever fires first ends the run, and the result says
// which (ClusterRun::limit_ended_it).
//
// The end: the command's exit code, as written by the job script, is
// kExited. The deadline or cancellation: scancel with SIGTERM to the job,
// then scancel after kill_grace; kTimedOut or kCancelled. Slurm's own end
// (asked of scontrol): TIMEOUT is kTimedOut; NODE_FAIL, PREEMPTED and
// BOOT_FAIL are kLost; a job cancelled by someone else is kCancelled; a job
// refused by sbatch (bad partition, say) or whose script could not start
// the command is kFailedToStart, with Slurm's words.
//
// The spool folder must be one the nodes share. Before its first job, the
// launcher checks it once with a probe job (nodes read a token this
// machine wrote there, and this machine reads their answer); when that
// fails, every Run ends kFailedToStart saying the nodes cannot see the
// folder. Runs started meanwhile wait for the probe.
//
// Start is not supported: a long-running server stays on this machine.
// While jobs wait and run, how they stand is asked of Slurm with one squeue
// a state_poll for all of them (SlurmStatePoll); scontrol is asked of one
// job only around its end.
//
// Thread-safe: any number of Runs may go at once.
class SlurmLauncher : public ProcessLauncher {
 public:
  // `local` runs the Slurm commands on this machine; `clock` measures the
  // deadlines and paces the polls. Both must outlive the launcher.
  SlurmLauncher(ProcessLauncher& local, Clock& clock,
                SlurmLauncherOptions options);

  ProcessResult Run(const ProcessRequest& request) override;

 private:
  class Job;

  // Ok once the probe said the nodes share the spool folder; the probe's
  // failure otherwise. Runs the probe on first use (under `request`'s
  // cancel token, and its deadline if it has one).
  Status SharedSpool(const ProcessRequest& request);
  // Runs the probe job; its answer (also kept in shared_ when it answered).
  Status Probe(const ProcessRequest& request);
  ProcessResult RunJob(const ProcessRequest& request);

  ProcessLauncher& local_;
  Clock& clock_;
  const SlurmLauncherOptions options_;
  // The Slurm commands' paths, looked up once.
  const std::string sbatch_;
  const std::string scancel_;
  const std::string scontrol_;
  SlurmStatePoll poll_;
  std::atomic<uint64_t> next_{0};
  // Runs waiting for the probe park (on a fiber) rather than block on the
  // mutex: a carrier blocked there could be the one the probe needs.
  std::mutex probe_mu_;
  FiberCondVar probe_done_;
  bool probing_ = false;
  // Set once a probe has answered (cancelled probes leave it unset).
  std::optional<Status> shared_;
};

// Cancels the jobs `ids` with scancel (from PATH), waiting at most 30 s
// for it to answer; nothing when `ids` is empty. For jobs a dead run left.
void CancelSlurmJobs(const std::vector<std::string>& ids);

// The sbatch options a placement asks for, without --time ("--partition=x",
// "--cpus-per-task=4", then `extra` as given).
std::vector<std::string> SbatchPlacementArgs(const ClusterPlacement& p);

// Slurm's --time for a limit: whole minutes, rounded up, at least 1.
std::string SlurmTimeLimit(Millis limit);

// The fields of one line of `scontrol show job -o` ("JobState=RUNNING
// Reason=None ..."): the value of `key`, or "" when absent.
std::string ScontrolField(const std::string& line, const std::string& key);

}  // namespace steps

#endif  // STEPS_PROCESS_SLURM_LAUNCHER_H_
