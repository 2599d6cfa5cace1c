#include "store/slurm_jobs.h"

#include <utility>

namespace steps::store {

SlurmJobRecorder::SlurmJobRecorder(Store& store, std::string run_id)
    : store_(store), run_id_(std::move(run_id)) {}

void SlurmJobRecorder::OnSubmitting() {
  std::call_once(submitting_, [this] { OnJobQueued(kAnyTaggedJob); });
}

void SlurmJobRecorder::Finish() { OnJobEnded(kAnyTaggedJob); }

void CancelRecordedSlurmJobs(Store& store,
                             const std::vector<RecordedSlurmJob>& jobs) {
  if (jobs.empty()) return;
  std::vector<std::string> ids;
  bool tagged = false;
  for (const RecordedSlurmJob& j : jobs) {
    if (j.job_id == kAnyTaggedJob)
      tagged = true;
    else
      ids.push_back(j.job_id);
  }
  CancelSlurmJobs(ids);
  if (tagged) CancelTaggedSlurmJobs(SlurmRunTag(jobs.front().run_id));
  for (const RecordedSlurmJob& j : jobs)
    (void)MarkSlurmJob(store, j, "cancelled");
}

void SlurmJobRecorder::OnJobQueued(const std::string& job_id) {
  store_.WarnWriteFailed(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT OR REPLACE INTO slurm_jobs (run_id, job_id, status)"
        " VALUES (?1, ?2, 'queued')");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, run_id_);
    (*st)->Bind(2, job_id);
    return (*st)->Run();
  }));
}

void SlurmJobRecorder::OnJobEnded(const std::string& job_id) {
  // A row left behind names a job that has ended: cancelling it again is
  // harmless, so the delete can wait.
  store_.WriteSoon([run_id = run_id_, job_id](Db& db) -> Status {
    Result<StatementUse> st =
        db.Prepared("DELETE FROM slurm_jobs WHERE run_id = ?1 AND job_id = ?2");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, run_id);
    (*st)->Bind(2, job_id);
    return (*st)->Run();
  });
}

Result<std::vector<RecordedSlurmJob>> QueuedSlurmJobs(Store& store) {
  std::vector<RecordedSlurmJob> jobs;
  Status s = store.Read([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "SELECT j.run_id, j.job_id, r.host, r.pid, r.pid_start"
        " FROM slurm_jobs j LEFT JOIN runs r ON r.id = j.run_id"
        " WHERE j.status = 'queued' ORDER BY j.run_id, j.job_id");
    if (!st.ok()) return st.status();
    return (*st)->EachRow([&](const Statement& row) {
      RecordedSlurmJob j;
      j.run_id = row.Text(0);
      j.job_id = row.Text(1);
      j.host = row.Text(2);
      j.pid = row.OptionalInt(3).value_or(0);
      j.pid_start = row.Text(4);
      jobs.push_back(std::move(j));
    });
  });
  if (!s.ok()) return s;
  return jobs;
}

Status MarkSlurmJob(Store& store, const RecordedSlurmJob& job,
                    const std::string& status) {
  return store.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "UPDATE slurm_jobs SET status = ?3 WHERE run_id = ?1 AND"
        " job_id = ?2");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, job.run_id);
    (*st)->Bind(2, job.job_id);
    (*st)->Bind(3, status);
    return (*st)->Run();
  });
}

}  // namespace steps::store
