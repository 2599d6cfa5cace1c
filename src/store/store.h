// The run store: one SQLite file (default STATE_DIR/steps.db, WAL) that
// records runs, jobs, steps, hooks, attempts, agent turns and output, and
// holds the step cache's entries. See docs/store.md for what is where.
#ifndef STEPS_STORE_STORE_H_
#define STEPS_STORE_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cancel.h"
#include "core/status.h"
#include "store/group_commit.h"
#include "store/sqlite.h"

namespace steps::store {

// The schema's version, kept in PRAGMA user_version.
// Version 5 adds conversation_log (store/conversation_log.h); version 6 the
// run's pipeline file (runs.file_hash, runs.file_text) and
// run_interruptions (store/resume.h); version 7 gates (store/gates.h);
// version 8 an agent step's retries, retries denied and rate-limit waits
// (steps.retries, retries_denied, rate_wait_ms); version 9 the agent entry
// of an agent step (steps.agent).
inline constexpr int kSchemaVersion = 11;

// STATE_DIR/steps.db.
std::string StorePath(const std::string& state_dir);

// One connection shared by every writer and reader in this process.
// Thread-safe: calls are serialized by the store's lock.
class Store {
 public:
  // Opens the store at `path`, creating the file, its folder and the
  // schema when missing, and keeps the reserve beside it (kReserveBytes).
  // A disk too full to open the store on gets the reserve's room, and the
  // store starts in the disk-full mode. A file written by a newer steps is
  // refused.
  static Result<std::unique_ptr<Store>> Open(const std::string& path);
  // Opens an existing store for reading; NotFound when there is none.
  static Result<std::unique_ptr<Store>> OpenExisting(const std::string& path);

  const std::string& path() const { return path_; }

  // Runs `fn` under the lock in a transaction: everything `fn` wrote is
  // committed before this returns, or (when it returns an error) nothing
  // is. Writes from other threads that arrive while one is committed are
  // committed together in the next transaction (group commit), each in a
  // savepoint of its own, so one's error undoes only its own writes.
  // While another process holds the store's write lock, the write waits
  // for it (WaitForLocksUntil), but not past `wait_until` (a step's
  // deadline): then it fails, busy, and nothing of it is stored.
  using WaitUntil = std::optional<std::chrono::steady_clock::time_point>;
  Status Write(const std::function<Status(Db&)>& fn,
               WaitUntil wait_until = std::nullopt);
  // A run's writes wait for a lock another process holds (a second run
  // committing, a `sqlite3` shell with a transaction open) for as long as
  // it takes, until `abandon` is cancelled (the run's abort): a record the
  // run relies on, an attempt's start above all, is never skipped because
  // the store was busy. A wait past busy_patience() logs WRN store.busy
  // once, and INF store.busy_ended when it ends. Without this (a reader)
  // a statement waits busy_patience() and then fails; once `abandon` is
  // cancelled, writes wait kInterruptedBusyPatience in all, then fail.
  void WaitForLocksUntil(CancelToken abandon);
  // An interrupted run's writes wait at most this long in all.
  static constexpr std::chrono::milliseconds kInterruptedBusyPatience{1000};
  // Default: Db::kDefaultBusyWaitMs. Tests shorten it.
  void SetBusyPatience(std::chrono::milliseconds patience);
  std::chrono::milliseconds busy_patience() const;
  // Waits for another process's lock so far, one per batch or read that
  // had to wait (tests).
  int64_t busy_waits() const { return busy_waits_.load(); }
  // What a WriteSoon holds: a record the run's state needs (a step's
  // start row, a process group's removal), the end of something (an
  // attempt's, a step's), or a payload (an output line, a cache entry)
  // that may be dropped when the store cannot commit everything queued (a
  // full disk). An end rides with the next Write only when one comes
  // within kEndLinger (the next attempt's start in a sequence of tasks);
  // otherwise the flusher commits it then.
  enum class Soon { kRecord, kEnd, kPayload };
  // Queues `fn` for a later transaction instead of one of its own: it is
  // committed with the next Write (before that write, in the order queued),
  // by the store's flusher within kSoonLinger (it commits what is queued
  // at each tick of that period), by Flush or Read, or when the store
  // closes. For records nothing waits on and a resume does not need. A
  // process killed meanwhile loses them. `fn` must own what it writes;
  // `bytes` is about how much it holds. `failed` gets the error of a write
  // that failed or was dropped (without one, WarnWriteFailed does); it may
  // run under the store's lock: it must not touch the store.
  //
  // Queued payloads never grow without bound: past kSoonFlushWrites writes
  // or kSoonFlushBytes bytes, a payload's writer commits the queue itself
  // (so a chatty task is slowed to the pace of the disk, as with a write
  // each), waiting no longer than kFullQueueWait or `wait_until` (its
  // step's time), and not at all while another process is known to hold
  // the store's lock (its last begin found it held): a task's output is
  // never held by another process. Past kMaxSoonWrites or kMaxSoonBytes
  // (commits keep failing to begin), new payloads are dropped and
  // reported. Records and ends are never dropped nor made to wait here.
  void WriteSoon(std::function<Status(Db&)> fn,
                 std::function<void(const Status&)> failed = nullptr,
                 size_t bytes = 0, Soon kind = Soon::kRecord,
                 WaitUntil wait_until = std::nullopt);
  // Commits what WriteSoon queued; Ok when nothing was queued. Waits for a
  // busy store no longer than `wait_until` (then what was queued stays
  // queued, and this answers busy).
  Status Flush(WaitUntil wait_until = std::nullopt);
  // Logs WRN store.write_failed once for this store, whichever writer
  // (recorder, process groups) saw the failure.
  void WarnWriteFailed(const Status& s);
  // The longest a WriteSoon waits for a transaction to ride with.
  static constexpr std::chrono::milliseconds kSoonLinger{100};
  // The longest an end (Soon::kEnd) waits for a transaction to ride with.
  static constexpr std::chrono::microseconds kEndLinger{1000};
  // The longest a payload's writer waits for the commit of a full queue.
  static constexpr std::chrono::milliseconds kFullQueueWait{100};
  static constexpr size_t kSoonFlushWrites = 10000;
  static constexpr size_t kSoonFlushBytes = 4 << 20;
  static constexpr size_t kMaxSoonWrites = 100000;
  static constexpr size_t kMaxSoonBytes = 64 << 20;
  // Room kept for the records a run cannot end without: a writing store
  // keeps a file of this size beside its database (ReservePath) and
  // deletes it the first time the disk is full, so that the ends of steps,
  // jobs and the run still fit. From then on, payloads (output lines,
  // cache entries) are dropped unreported, and WRN store.disk_full says so
  // once; a record that still fails is reported (WarnWriteFailed).
  static constexpr size_t kReserveBytes = 16 << 20;
  // Once the disk is full, the output an attempt's or a step's end keeps
  // is cut to its last this many bytes (RunRecorder), so that ends fit.
  static constexpr size_t kFullDiskOutputBytes = 4096;
  static std::string ReservePath(const std::string& db_path);
  // Whether this store has found its disk full (and drops payloads).
  bool disk_full() const { return disk_full_.load(); }
  // Transactions committed so far (a batch of writes is one).
  int64_t commits() const;
  // Calls `hook` with the count of transactions committed so far after
  // each commit, before any write in it returns (under the store's lock:
  // it must not touch the store). For fault injection: `steps run` kills
  // itself there when STEPS_CHAOS_KILL_AFTER_COMMITS says so
  // (docs/resume.md). Default: none.
  void SetAfterCommit(std::function<void(int64_t commits)> hook);
  // Blocks until `n` writes wait behind the one being committed (tests).
  void WaitForQueuedWrites(size_t n) { group_.WaitForQueued(n); }
  // Runs `fn` under the lock, outside a write transaction, after what
  // WriteSoon queued was committed (a reader sees this process's writes).
  Status Read(const std::function<Status(Db&)>& fn);
  // The same without committing the queue first: `fn` sees what is
  // committed (this process's and others'), not what WriteSoon holds. For
  // a reader that knows nothing it needs is queued (the step cache), so
  // that reading does not cost a transaction for what would ride with the
  // next Write.
  Status ReadCommitted(const std::function<Status(Db&)>& fn);

  // Stops the flusher and commits what is still queued.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

 private:
  Store(std::string path, std::unique_ptr<Db> db)
      : path_(std::move(path)),
        db_(std::move(db)),
        group_([this](std::vector<GroupCommit::Item*>& batch) {
          CommitBatch(batch);
        }) {}
  struct SoonWrite {
    std::function<Status(Db&)> write;
    std::function<void(const Status&)> failed;
    size_t bytes = 0;
    Soon kind = Soon::kRecord;
    Status status;
  };
  void CommitBatch(std::vector<GroupCommit::Item*>& batch);
  // One try at committing `batch` with what WriteSoon queued.
  // REQUIRES: mu_ held.
  void CommitWaiting(std::vector<GroupCommit::Item*>& batch);
  // After a begin that failed busy: marks the writes whose time is not up
  // to be queued again (a run's writes wait for the lock, in rounds), and
  // sets the pause before the next round (busy_pause_); whether any is.
  // REQUIRES: mu_ held.
  bool WaitOn(std::vector<GroupCommit::Item*>& batch);
  // Commits `item` alone (no savepoint), once more when the first try
  // found the disk full and freed the reserve. REQUIRES: mu_ held.
  void CommitAlone(GroupCommit::Item& item);
  // One write in a savepoint of its own: its error undoes only itself
  // (while the transaction lasts). REQUIRES: mu_ held.
  Status InSavepoint(const std::function<Status(Db&)>& write);
  // Called right after a call on db_ failed: when it failed for want of
  // room, enters the disk-full mode (logged once) and deletes the reserve.
  // True when that freed room just now. REQUIRES: mu_ held.
  bool RoomFreed();
  // Commits `soon` and then `batch` in one transaction, each write in a
  // savepoint of its own. False when the transaction was lost (SQLite
  // rolls a whole transaction back on a full disk or an I/O error,
  // savepoints or not): nothing of it is stored, `why` says why. True
  // otherwise, with every status set. REQUIRES: mu_ held.
  bool TryCommit(std::vector<GroupCommit::Item*>& batch,
                 std::vector<SoonWrite>& soon, Status& why);
  // The queued WriteSoon writes, taken from the queue.
  std::vector<SoonWrite> TakeSoon();
  // Puts writes back at the front of the queue (a transaction that could
  // not begin).
  void Requeue(std::vector<SoonWrite> soon);
  void FlusherLoop();
  void Committed();  // REQUIRES: mu_ held.
  // Without `reserve`, no reserve is made (Open, once it deleted one).
  static Result<std::unique_ptr<Store>> OpenAt(const std::string& path,
                                               bool create,
                                               bool reserve = true);
  // Enters the disk-full mode, logged once; `freed`: the reserve was
  // deleted just now. REQUIRES: mu_ held.
  void EnterDiskFull(bool freed);
  // Db::BusyWait: whether to try again after the `n`-th busy answer of a
  // statement, after a sleep. A run's batch does not sleep here (with the
  // store's lock held) but between rounds. REQUIRES: mu_ held.
  bool WaitWhileBusy(int n);
  // The earliest time limit among the batch's writes (none when none has
  // one).
  static WaitUntil EarliestLimit(const std::vector<GroupCommit::Item*>& batch);
  // Until when the batch's begin waits for a lock: EarliestLimit.
  // REQUIRES: mu_ held.
  void SetBatchWait(const std::vector<GroupCommit::Item*>& batch);
  // Logs WRN store.busy once a wait has lasted busy_patience_.
  // REQUIRES: mu_ held, busy_since_ set.
  void WarnIfBusyLong(std::chrono::steady_clock::time_point now);
  // Logs the end of a wait that was warned about: the lock let go, or
  // (`gave_up`) still held, and what waited failed. REQUIRES: mu_ held.
  void EndBusyWait(bool gave_up);
  // Makes sure the reserve file holds kReserveBytes; an error when the
  // disk has no room for it or something else is in its place (the store
  // then runs without one).
  static Status HoldReserve(const std::string& db_path);

  std::string path_;
  mutable std::mutex mu_;
  std::unique_ptr<Db> db_;
  int64_t commits_ = 0;                        // Guarded by mu_.
  std::function<void(int64_t)> after_commit_;  // Guarded by mu_.
  GroupCommit group_;

  std::atomic<bool> warned_{false};
  std::atomic<bool> disk_full_{false};
  // The last begin found another process holding the lock, and nothing was
  // committed since.
  std::atomic<bool> held_elsewhere_{false};
  bool reserve_held_ = false;  // Guarded by mu_.
  // Waiting for another process's lock; guarded by mu_.
  std::optional<CancelToken> abandon_;
  std::chrono::milliseconds busy_patience_{Db::kDefaultBusyWaitMs};
  WaitUntil batch_wait_until_;
  bool begin_busy_ = false;  // The last begin failed busy.
  bool in_batch_ = false;    // CommitBatch is trying a round.
  // Rounds of a run's batch so far, and the pause before the next.
  int busy_rounds_ = 0;
  std::chrono::milliseconds busy_pause_{0};
  // When the wait of this batch (or read) began, and the statement's.
  std::optional<std::chrono::steady_clock::time_point> busy_since_;
  std::chrono::steady_clock::time_point statement_since_;
  // The first wait since the run was interrupted.
  std::optional<std::chrono::steady_clock::time_point> interrupted_since_;
  bool busy_warned_ = false;
  std::atomic<int64_t> busy_waits_{0};
  std::mutex soon_mu_;         // Guards the fields below.
  std::condition_variable soon_cv_;
  std::vector<SoonWrite> soon_;
  size_t soon_bytes_ = 0;
  // When the oldest end queued must be committed by; unset when none is.
  std::optional<std::chrono::steady_clock::time_point> end_due_;
  bool stopping_ = false;
  std::thread flusher_;  // Started by the first WriteSoon.
};

}  // namespace steps::store

#endif  // STEPS_STORE_STORE_H_
