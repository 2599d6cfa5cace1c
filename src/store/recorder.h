// The observer that writes a run into the store as it happens. The executor
// never knows it is there: it is one more RunObserver.
#ifndef STEPS_STORE_RECORDER_H_
#define STEPS_STORE_RECORDER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "core/clock.h"
#include "pipeline/observer.h"
#include "store/plan_outline.h"
#include "store/store.h"

namespace steps::store {

// Every event that marks a durable point is one transaction; a step's
// start, output and log lines ride with the next (Store::WriteSoon). The run's
// row is written at OnRunStart with status "running", this process's pid, its
// start time and the host; a reader that finds such a row whose process is gone
// shows the run as interrupted (a run killed with SIGKILL). Thread-safe.
//
// A write that fails is reported once on the log (WRN store.write_failed)
// and the run goes on: the record is lost, never the run.
class RunRecorder : public pipeline::RunObserver {
 public:
  // `store` and `clock` must outlive the recorder. `clock` stamps events
  // that carry no time of their own and turns deadlines into wall time.
  explicit RunRecorder(Store& store, Clock& clock = RealClock());

  // The outline of the plan the run will follow, recorded with the run's
  // row at OnRunStart (runs.plan). Call before the run starts; a run
  // without one records an empty outline.
  void SetPlan(std::vector<PlannedJob> outline);

  // The pipeline file the run starts from: its SHA-256 (hex) and bytes,
  // recorded with the run's row (runs.file_hash, runs.file_text) so that
  // `steps resume` can tell whether it changed. Call before the run starts.
  void SetFile(std::string hash, std::string text);

  // Makes this recorder continue the stored run of the same id instead of
  // writing a new one (`steps resume`): OnRunStart puts its row back to
  // running with this process's pid and records an interruption (how the
  // run had ended, `status`, when it died, `died_ms`, and now); sequence
  // numbers, output lines and checkpoints continue from the stored ones; a
  // step that was in flight keeps its stored id and rows; replayed records
  // (StepRecord::resumed) are not written again. Call before the run starts.
  void SetResume(std::string status, int64_t died_ms);

  void OnRunStart(const pipeline::RunRecord& run) override;
  void OnJobStart(const std::string& job,
                  std::optional<SteadyTime> deadline) override;
  void OnStepStart(const pipeline::StepRef& step,
                   std::optional<SteadyTime> deadline) override;
  void OnAttemptStart(const pipeline::StepRef& step, int attempt, int of,
                      std::optional<SteadyTime> deadline) override;
  void OnOutput(const pipeline::StepRef& step, OutputStream stream,
                std::string_view line) override;
  // Stored with the output lines, as stream "log". An agent's
  // "agent.nudge" line also stamps the step's nudge_ms.
  void OnLog(const pipeline::StepRef& step, std::string_view line) override;
  // Stamps the turn with the time it is reported (agent_turns.at_ms) and
  // writes it with the step's next checkpoints (OnCheckpoints), or at the
  // step's end: a turn row is no durable point, and a resumed conversation
  // writes its turns again from its checkpoints.
  void OnAgentTurn(const pipeline::StepRef& step,
                   const agent::AgentTurnRecord& turn) override;
  // Writes now the turn rows reported since the step's last durable point
  // (benchmarks compare with a recording that writes each as it comes).
  void WriteReportedTurns(const pipeline::StepRef& step);
  // Rows of conversation_log, committed together before this returns: the
  // request is sent, or the tool runs, only once they are stored. Once the
  // disk is full (Store::disk_full) none are written (logged once). An
  // empty list writes the turns reported since the last durable point.
  void OnCheckpoints(
      const pipeline::StepRef& step,
      const std::vector<agent::ConversationCheckpoint>& checkpoints) override;
  void OnAttemptEnd(const pipeline::StepRef& step,
                    const pipeline::AttemptRecord& attempt) override;
  void OnStepEnd(const pipeline::StepRecord& step) override;
  void OnJobEnd(const pipeline::JobRecord& job) override;
  void OnRunEnd(const pipeline::RunRecord& run) override;

  // Output lines kept per step; later lines are counted, not stored.
  static constexpr int kMaxOutputLines = 10000;

  // How often the run's row says it is alive (runs.alive_ms), while it
  // runs: a run killed outright is taken to have died at its latest
  // record (store/resume.h), which this keeps within that period of its
  // death when nothing else is written (a long task, a job in Slurm's
  // queue).
  static constexpr std::chrono::seconds kAliveEvery{2};

  ~RunRecorder() override;

  // Turn rows written, since construction: a step's end writes again only
  // the turns whose row it does not hold as its record says (benchmarks
  // and tests count them).
  int64_t turn_rows_written() const;

 private:
  // The stored id of a step: its StepRef id, or with "~N" for the Nth run
  // of the same id (a fixer runs once per failed attempt).
  std::string StoredId(const pipeline::StepRef& step, bool starting);
  std::optional<int64_t> WallMs(std::optional<SteadyTime> t) const;
  // How long a write of step `id` may wait for a busy store: its attempt's
  // deadline (none before its first attempt, or without one).
  // REQUIRES: mu_ held.
  Store::WaitUntil WriteLimit(const std::string& id) const;
  void AddLine(const pipeline::StepRef& step, std::string_view stream,
               std::string_view line);
  void Check(const Status& s);
  // Resume mode's OnRunStart: the run row, the interruption, the counters.
  Status ReopenRun(Db& db, const pipeline::RunRecord& run);
  Status LoadCounters(Db& db);
  // Starts and stops the thread that stamps runs.alive_ms every
  // kAliveEvery.
  void StartAlive();
  void StopAlive();

  Store& store_;
  Clock& clock_;
  std::atomic<bool> checkpoints_dropped_{false};  // Logged once.
  std::thread alive_;
  std::mutex alive_mu_;
  std::condition_variable alive_cv_;
  bool alive_stop_ = false;                       // Guarded by alive_mu_.
  std::mutex mu_;                                 // Guards the fields below.
  std::string run_id_;
  std::string taken_by_;
  std::vector<PlannedJob> outline_;
  int64_t seq_ = 0;
  std::map<std::string, int> runs_of_id_;
  std::map<std::string, std::string> current_id_;
  std::map<std::string, int> output_lines_;
  std::map<std::string, int64_t> checkpoints_;  // Rows per stored step id.
  // When each running attempt's time is up, by stored step id: its writes
  // wait for the store no longer (Store::Write).
  std::map<std::string, Store::WaitUntil> wait_until_;
  // Turn rows not written yet, by stored step id, with the time each was
  // reported: they go with the step's next durable point or its end.
  struct PendingTurn {
    agent::AgentTurnRecord turn;
    int64_t at_ms = 0;
  };
  std::map<std::string, std::vector<PendingTurn>> pending_turns_;
  std::vector<PendingTurn> TakePendingTurns(const std::string& id);
  // What a write needs of the recorder, held by value: a queued write may
  // be committed after the recorder is gone.
  struct WriteContext {
    std::string run_id;
    std::string taken_by;
    Store* store = nullptr;  // Outlives its queue.
    std::shared_ptr<std::atomic<int64_t>> rows_written;
  };
  WriteContext Context();
  // A step's end: its row, its attempts, and the turns of `step` at
  // `rewrite` (places in its record).
  static Status WriteStepEnd(Db& db, const WriteContext& c,
                             const std::string& id, int64_t seq,
                             const pipeline::StepRecord& step,
                             const std::vector<PendingTurn>& turns,
                             const std::vector<size_t>& rewrite);
  static Status WritePendingTurns(Db& db, const WriteContext& c,
                                  const std::string& id,
                                  const std::vector<PendingTurn>& turns);
  // Notes that `turns` of step `id` are stored (their transaction was
  // committed), so that the step's end need not write them again.
  void RememberStored(const std::string& id,
                      const std::vector<PendingTurn>& turns);
  // The turns of `record` (step `id`) whose stored row, if any, is not what
  // the record says, given that `pending` is written first in the same
  // transaction; forgets what was remembered of the step.
  std::vector<const agent::AgentTurnRecord*> TurnsToRewrite(
      const std::string& id, const std::vector<agent::AgentTurnRecord>& record,
      const std::vector<PendingTurn>& pending);
  // A fingerprint of each stored turn, by stored step id and turn number.
  std::map<std::string, std::map<int, uint64_t>> stored_turns_;
  std::shared_ptr<std::atomic<int64_t>> turn_rows_written_ =
      std::make_shared<std::atomic<int64_t>>(0);
  std::string file_hash_;
  std::string file_text_;
  std::optional<std::string> resume_status_;  // Set in resume mode.
  int64_t died_ms_ = 0;
  // Resume mode: stored steps that did not end (ID or ID~N); the first
  // start of a step reuses the latest such row of its id (and its rows)
  // rather than making a new "ID~N".
  std::set<std::string> reopen_;
};

// This process's start time as the kernel counts it (/proc/self/stat), so
// that a later process with the same pid is not mistaken for a run's.
// Empty when it cannot be read (no such process, no /proc).
std::string ProcessStartTime(int64_t pid);

// This machine's host name, as recorded on runs.
std::string HostName();

}  // namespace steps::store

#endif  // STEPS_STORE_RECORDER_H_
