// The process groups of a run's running processes, kept in the store so
// that a later `steps run` can end them when the run that started them died
// without doing so (SIGKILL, the OOM killer). See docs/security.md,
// "Processes".
//
// Table process_groups: one row per group, (run_id, pgid, leader_start,
// status). The row is written `running` when the group's leader starts and
// deleted when the group has been killed and its leader reaped; a later run
// that ends the group of a dead run sets `killed` (it sent SIGKILL) or
// `gone` (nothing of it was left, or the pid now names another process).
#ifndef STEPS_STORE_PROCESS_GROUPS_H_
#define STEPS_STORE_PROCESS_GROUPS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "process/local_launcher.h"
#include "store/store.h"

namespace steps::store {

// Records one run's groups as they start and end. A write that fails is
// logged once (WRN store.write_failed) and the run goes on. Thread-safe.
class ProcessGroupRecorder : public ProcessGroupObserver {
 public:
  // `store` must outlive the recorder.
  ProcessGroupRecorder(Store& store, std::string run_id);

  // The row is committed before this returns; a busy store is waited for
  // until `wait_until` at most.
  void OnGroupStart(const ProcessGroupId& group,
                    std::optional<std::chrono::steady_clock::time_point>
                        wait_until) override;
  // The row's delete rides with the store's next transaction.
  void OnGroupEnd(const ProcessGroupId& group) override;

 private:
  void Check(const Status& s);

  Store& store_;
  const std::string run_id_;
};

struct RecordedGroup {
  std::string run_id;
  ProcessGroupId group;
  // The run's recorded process (runs.host, pid, pid_start); host empty
  // when the run has no row.
  std::string host;
  int64_t pid = 0;
  std::string pid_start;
};

// Every group recorded `running`, of any run, oldest run first, with its
// run's process.
Result<std::vector<RecordedGroup>> RunningGroups(Store& store);

// Sets the status of one recorded group ("killed" or "gone").
Status MarkGroup(Store& store, const RecordedGroup& group,
                 const std::string& status);

}  // namespace steps::store

#endif  // STEPS_STORE_PROCESS_GROUPS_H_
