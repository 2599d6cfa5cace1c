// The Slurm jobs a run has queued and not yet seen end, kept in the store
// so that, when the run dies without cancelling them (SIGKILL, the OOM
// killer), its guardian or a later run cancels them (docs/slurm.md).
//
// Table slurm_jobs: one row per job, (run_id, job_id, status). The row is
// written `queued` once sbatch answers with the id, before anything waits
// on the job, and deleted when the job has ended; the guardian or a later
// run that cancels the job of a dead run sets `cancelled`. A row with
// job_id kAnyTaggedJob, written before the run's first sbatch and deleted
// when the run ends, says jobs may exist that no row names (sbatch queued
// them and the run died before it answered): they are found by their tag
// (SlurmRunTag).
#ifndef STEPS_STORE_SLURM_JOBS_H_
#define STEPS_STORE_SLURM_JOBS_H_

#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "process/slurm_launcher.h"
#include "store/store.h"

namespace steps::store {

// Records one run's jobs as they are queued and end. A write that fails is
// logged once (WRN store.write_failed) and the run goes on. Thread-safe.
inline constexpr char kAnyTaggedJob[] = "*";

class SlurmJobRecorder : public SlurmJobObserver {
 public:
  // `store` must outlive the recorder.
  SlurmJobRecorder(Store& store, std::string run_id);

  // The first call writes the kAnyTaggedJob row (committed before this
  // returns); later calls do nothing.
  void OnSubmitting() override;
  // The run is over and its launcher let go of every job: the
  // kAnyTaggedJob row goes.
  void Finish();

  // The row is committed before this returns.
  void OnJobQueued(const std::string& job_id) override;
  // The row's delete rides with the store's next transaction.
  void OnJobEnded(const std::string& job_id) override;

 private:
  Store& store_;
  const std::string run_id_;
  std::once_flag submitting_;
};

struct RecordedSlurmJob {
  std::string run_id;
  std::string job_id;
  // The run's recorded process (runs.host, pid, pid_start); host empty
  // when the run has no row.
  std::string host;
  int64_t pid = 0;
  std::string pid_start;
};

// Every job recorded `queued`, of any run, ordered by run.
Result<std::vector<RecordedSlurmJob>> QueuedSlurmJobs(Store& store);

// Sets the status of one recorded job ("cancelled").
Status MarkSlurmJob(Store& store, const RecordedSlurmJob& job,
                    const std::string& status);

// Cancels what `jobs` (all of one run) name: each job by its id, and the
// jobs of the run's tag when a kAnyTaggedJob row is among them; marks each
// row `cancelled`.
void CancelRecordedSlurmJobs(Store& store,
                             const std::vector<RecordedSlurmJob>& jobs);

}  // namespace steps::store

#endif  // STEPS_STORE_SLURM_JOBS_H_
