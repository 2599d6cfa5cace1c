// `steps __guard STATE_DIR RUN_ID PID locked|unlocked`: waits for the run (process PID) to
// end; if it died without saying it ended as it should, ends what it left
// running and records that in the store. See process/guardian.h.
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/log.h"
#include "process/guardian.h"
#include "process/slurm_launcher.h"
#include "store/process_groups.h"
#include "store/slurm_jobs.h"
#include "store/store.h"

namespace steps::cli {
namespace {

// How long the guardian waits for what it killed to be gone.
constexpr Millis kLeftoverWait{5000};

// The groups the run recorded as running (none without a store).
std::vector<store::RecordedGroup> RecordedGroupsOf(store::Store* db,
                                                   const std::string& run_id) {
  std::vector<store::RecordedGroup> mine;
  if (db == nullptr) return mine;
  Result<std::vector<store::RecordedGroup>> all = store::RunningGroups(*db);
  if (!all.ok()) {
    LogEvent(LogLevel::kWarn, "run.orphans_unchecked",
             {{"run", run_id}, {"error", all.status().message()}});
    return mine;
  }
  for (store::RecordedGroup& g : *all) {
    if (g.run_id == run_id) mine.push_back(std::move(g));
  }
  return mine;
}

}  // namespace

int RunGuardianCommand(int argc, char** argv) {
  if (argc != 6) return kExitUsage;
  const std::string state_dir = argv[2];
  const std::string run_id = argv[3];
  const pid_t starter = static_cast<pid_t>(std::atol(argv[4]));
  // argv[5] says whether descriptor 3 is the run's lock ("locked"): held
  // until we exit, either way nothing more to do with it.
  // In a session of its own already; a stray SIGINT or SIGHUP sent to it
  // by name still must not leave a dead run's processes running.
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  if (RunEndedCleanly(STDIN_FILENO)) return kExitOk;

  std::unique_ptr<store::Store> db;
  if (auto opened = store::Store::OpenExisting(store::StorePath(state_dir));
      opened.ok()) {
    db = std::move(*opened);
  }
  std::vector<store::RecordedGroup> recorded = RecordedGroupsOf(db.get(), run_id);
  std::vector<ProcessGroupId> groups;
  for (const store::RecordedGroup& g : recorded) groups.push_back(g.group);
  std::vector<bool> ended;
  LeftoverEnd end = EndLeftovers(starter, groups, kLeftoverWait, &ended);
  for (size_t i = 0; i < recorded.size() && db; ++i) {
    (void)store::MarkGroup(*db, recorded[i], ended[i] ? "killed" : "gone");
  }
  if (end.groups_killed > 0 || end.escaped_killed > 0) {
    LogEvent(LogLevel::kWarn, "run.orphans_killed",
             {{"run", run_id},
              {"groups", end.groups_killed},
              {"escaped", end.escaped_killed}});
  }
  // Its Slurm jobs (docs/slurm.md): cancelled, so that none runs on.
  if (db) {
    std::vector<store::RecordedSlurmJob> jobs;
    if (auto queued = store::QueuedSlurmJobs(*db); queued.ok()) {
      for (store::RecordedSlurmJob& j : *queued) {
        if (j.run_id == run_id) jobs.push_back(std::move(j));
      }
    }
    store::CancelRecordedSlurmJobs(*db, jobs);
    if (!jobs.empty()) {
      LogEvent(LogLevel::kWarn, "run.orphans_cancelled", {{"run", run_id}});
    }
  }
  // The run is over and nothing of it runs: its lock (descriptor 3) goes
  // when we exit. The lock file stays, free: it says the run died, also to
  // another machine that finds this folder restored from a cache
  // (docs/resume.md); a resumed run takes it again.
  return kExitOk;
}

}  // namespace steps::cli
