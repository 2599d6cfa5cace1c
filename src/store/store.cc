#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <utility>

#include "core/log.h"

namespace steps::store {

namespace {

// Statuses are "running" until the thing ends, then its outcome. Times are
// milliseconds since the epoch (UTC); durations milliseconds.
//
// Every statement is CREATE ... IF NOT EXISTS, so the same script brings an
// older store up to date: version 2 added process_groups (the process
// groups of running tasks, see store/process_groups.h). Columns added to a
// table that exists are added by kAddedColumns.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  file TEXT NOT NULL,
  status TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  duration_ms INTEGER,
  taken_by TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  pid_start TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  caused_by_error INTEGER NOT NULL DEFAULT 0,
  execution TEXT NOT NULL DEFAULT '[]',
  started_ms INTEGER NOT NULL,
  duration_ms INTEGER,
  deadline_ms INTEGER,
  PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS steps (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step_id TEXT NOT NULL,
  job TEXT NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  hook TEXT,
  fixer INTEGER NOT NULL DEFAULT 0,
  line INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  output TEXT NOT NULL DEFAULT '',
  started_ms INTEGER NOT NULL,
  duration_ms INTEGER,
  deadline_ms INTEGER,
  identity TEXT NOT NULL DEFAULT '',
  cached INTEGER NOT NULL DEFAULT 0,
  start_seq INTEGER NOT NULL,
  end_seq INTEGER,
  agent_turns INTEGER,
  provider_requests INTEGER,
  prompt_tokens INTEGER,
  completion_tokens INTEGER,
  usd REAL,
  nudge_sent INTEGER,
  deadline_disclosed INTEGER,
  fallbacks_taken TEXT,
  retries INTEGER,
  retries_denied INTEGER,
  rate_wait_ms INTEGER,
  cached_from_run TEXT,
  cached_from_step TEXT,
  nudge_ms INTEGER,
  cell TEXT NOT NULL DEFAULT '',
  agent TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, step_id)
);
CREATE VIEW IF NOT EXISTS hooks AS SELECT * FROM steps WHERE hook IS NOT NULL;
CREATE TABLE IF NOT EXISTS attempts (
  run_id TEXT NOT NULL,
  step_id TEXT NOT NULL,
  number INTEGER NOT NULL,
  of INTEGER NOT NULL,
  status TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  duration_ms INTEGER,
  deadline_ms INTEGER,
  identity TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  timed_out INTEGER NOT NULL DEFAULT 0,
  clipped_to_ms INTEGER,
  exhausted_by TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  output TEXT NOT NULL DEFAULT '',
  fixed INTEGER NOT NULL DEFAULT 0,
  taken_by TEXT NOT NULL,
  slurm_job TEXT,
  queued_ms INTEGER,
  PRIMARY KEY (run_id, step_id, number),
  FOREIGN KEY (run_id, step_id) REFERENCES steps(run_id, step_id)
    ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS agent_turns (
  run_id TEXT NOT NULL,
  step_id TEXT NOT NULL,
  turn INTEGER NOT NULL,
  provider_requests INTEGER NOT NULL,
  source TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  usd REAL NOT NULL,
  tool_calls TEXT NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (run_id, step_id, turn),
  FOREIGN KEY (run_id, step_id) REFERENCES steps(run_id, step_id)
    ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS conversation_log (
  run_id TEXT NOT NULL,
  step_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  turn INTEGER NOT NULL,
  at_ms INTEGER NOT NULL,
  checkpoint TEXT NOT NULL,
  PRIMARY KEY (run_id, step_id, seq),
  FOREIGN KEY (run_id, step_id) REFERENCES steps(run_id, step_id)
    ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS run_interruptions (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  number INTEGER NOT NULL,
  status TEXT NOT NULL,
  died_ms INTEGER NOT NULL,
  resumed_ms INTEGER NOT NULL,
  taken_by TEXT NOT NULL,
  PRIMARY KEY (run_id, number)
);
CREATE TABLE IF NOT EXISTS output_lines (
  run_id TEXT NOT NULL,
  step_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  stream TEXT NOT NULL,
  line TEXT NOT NULL,
  PRIMARY KEY (run_id, step_id, seq),
  FOREIGN KEY (run_id, step_id) REFERENCES steps(run_id, step_id)
    ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS slurm_jobs (
  run_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  status TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id)
);
CREATE TABLE IF NOT EXISTS process_groups (
  run_id TEXT NOT NULL,
  pgid INTEGER NOT NULL,
  leader_start INTEGER NOT NULL,
  status TEXT NOT NULL,
  PRIMARY KEY (run_id, pgid, leader_start)
);
CREATE TABLE IF NOT EXISTS gates (
  run_id TEXT NOT NULL,
  step_id TEXT NOT NULL,
  name TEXT NOT NULL,
  cell TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL,
  approvers TEXT NOT NULL,
  opened_ms INTEGER NOT NULL,
  deadline_ms INTEGER,
  on_expiry TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  decided_by TEXT NOT NULL DEFAULT '',
  via TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  decided_ms INTEGER,
  PRIMARY KEY (run_id, step_id)
);
CREATE TABLE IF NOT EXISTS cache (
  key TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  step_id TEXT NOT NULL,
  output TEXT NOT NULL,
  outputs TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  step_name TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  lines TEXT NOT NULL DEFAULT '',
  size_bytes INTEGER NOT NULL DEFAULT 0,
  format INTEGER NOT NULL DEFAULT 1
);
)sql";

// Version 3: a cached step names the run and step it came from; a cache
// entry keeps its step's name, exit code, printed lines, size and format.
// Rows of an older store get the defaults: format 1, which the step cache
// never finds (store/cache.h, kCacheFormat). Version 3 also keeps the run's
// plan outline (runs.plan, JSON, store/plan_outline.h: a reader shows the
// steps not started yet; '[]' for runs recorded before), when each agent
// turn's answer arrived (agent_turns.at_ms) and when an agent step's
// deadline nudge was sent (steps.nudge_ms).
// Version 6 keeps the pipeline file a run started from (runs.file_hash, the
// SHA-256 of its bytes, and runs.file_text, the bytes; '' and NULL for runs
// recorded before, which `steps resume` refuses) and the interruptions of a
// resumed run (run_interruptions).
// Version 7 keeps gate steps and their decisions (gates, store/gates.h).
// Version 9 keeps the agent entry an agent step, fixer or judge talked to
// (steps.agent; '' for steps recorded before, which `steps cost` takes by
// their name).
// Version 11 keeps when a running run last said it was alive
// (runs.alive_ms, every RunRecorder::kAliveEvery; NULL before), which a
// resume reads as the latest record of a run killed outright.
struct AddedColumn {
  const char* table;
  const char* column;
  const char* declaration;
};
constexpr AddedColumn kAddedColumns[] = {
    {"steps", "cached_from_run", "TEXT"},
    {"steps", "cached_from_step", "TEXT"},
    {"cache", "step_name", "TEXT NOT NULL DEFAULT ''"},
    {"cache", "exit_code", "INTEGER"},
    {"cache", "lines", "TEXT NOT NULL DEFAULT ''"},
    {"cache", "size_bytes", "INTEGER NOT NULL DEFAULT 0"},
    {"cache", "format", "INTEGER NOT NULL DEFAULT 1"},
    {"runs", "plan", "TEXT NOT NULL DEFAULT '[]'"},
    {"agent_turns", "at_ms", "INTEGER"},
    {"steps", "nudge_ms", "INTEGER"},
    {"steps", "cell", "TEXT NOT NULL DEFAULT ''"},
    {"steps", "agent", "TEXT NOT NULL DEFAULT ''"},
    {"runs", "file_hash", "TEXT NOT NULL DEFAULT ''"},
    {"runs", "file_text", "TEXT"},
    {"steps", "retries", "INTEGER"},
    {"steps", "retries_denied", "INTEGER"},
    {"steps", "rate_wait_ms", "INTEGER"},
    {"attempts", "slurm_job", "TEXT"},
    {"attempts", "queued_ms", "INTEGER"},
    {"runs", "alive_ms", "INTEGER"},
};

Result<bool> HasColumn(Db& db, const std::string& table,
                       const std::string& column) {
  Result<StatementUse> st =
      db.Prepared("SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, table);
  (*st)->Bind(2, column);
  Result<bool> row = (*st)->Step();
  if (!row.ok()) return row.status();
  return *row && (*st)->Int(0) > 0;
}

// Adds each of kAddedColumns its table lacks (a table made by kSchema has
// them all already).
Status AddMissingColumns(Db& db) {
  for (const AddedColumn& c : kAddedColumns) {
    Result<bool> has = HasColumn(db, c.table, c.column);
    if (!has.ok()) return has.status();
    if (*has) continue;
    if (Status s = db.Exec(std::string("ALTER TABLE ") + c.table +
                           " ADD COLUMN " + c.column + " " + c.declaration);
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

Status ApplySchema(Db& db) {
  int version = 0;
  {
    Result<StatementUse> st = db.Prepared("PRAGMA user_version");
    if (!st.ok()) return st.status();
    Result<bool> row = (*st)->Step();
    if (!row.ok()) return row.status();
    if (*row) version = static_cast<int>((*st)->Int(0));
  }
  if (version > kSchemaVersion) {
    return InvalidArgument(
        "the run store was written by a newer steps "
        "(schema " +
        std::to_string(version) + ", this one knows " +
        std::to_string(kSchemaVersion) + ")");
  }
  if (version == kSchemaVersion) return Status::Ok();
  Transaction tx(db);
  if (!tx.begun().ok()) return tx.begun();
  if (Status s = db.Exec(kSchema); !s.ok()) return s;
  if (Status s = AddMissingColumns(db); !s.ok()) return s;
  if (Status s =
          db.Exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      !s.ok()) {
    return s;
  }
  return tx.Commit();
}

}  // namespace

std::string StorePath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "steps.db").string();
}

namespace {

// Whether the filesystem holding `file` has less than a page or two left
// for this process.
bool DiskFullAt(const std::string& file) {
  struct statvfs fs;
  const std::string dir = std::filesystem::path(file).parent_path().string();
  if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return false;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < (64u << 10);
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  Result<std::unique_ptr<Store>> store = OpenAt(path, true);
  if (store.ok() || store.status().code() != StatusCode::kIoError) {
    return store;
  }
  // The disk filled since a run kept its reserve: that room opens the
  // store and records this run, which starts with the disk full. Only on
  // a full disk (statvfs): a store locked by another run keeps its reserve.
  const std::string reserve = ReservePath(path);
  struct stat st;
  if (!DiskFullAt(reserve) || lstat(reserve.c_str(), &st) != 0 ||
      !S_ISREG(st.st_mode) || unlink(reserve.c_str()) != 0) {
    return store;
  }
  Result<std::unique_ptr<Store>> again = OpenAt(path, true, false);
  if (!again.ok()) return store;
  Store& opened = **again;
  std::lock_guard<std::mutex> lock(opened.mu_);
  opened.EnterDiskFull(true);
  return again;
}

Result<std::unique_ptr<Store>> Store::OpenExisting(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return NotFound("no runs recorded: no run store at " + path +
                    " (`steps run` records there; --state-dir or "
                    "STEPS_STATE_DIR points elsewhere)");
  return OpenAt(path, false);
}

Result<std::unique_ptr<Store>> Store::OpenAt(const std::string& path,
                                             bool create, bool reserve) {
  Result<std::unique_ptr<Db>> db = Db::Open(path, create);
  if (!db.ok()) return db.status();
  // WAL: readers (steps show, the UI) never block the run writing. NORMAL
  // sync: a killed process loses nothing committed; only a power cut may
  // lose the last transactions.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
        "PRAGMA foreign_keys=ON"}) {
    if (Status s = (*db)->Exec(pragma); !s.ok()) return s;
  }
  if (Status s = ApplySchema(**db); !s.ok()) return s;
  std::unique_ptr<Store> store(new Store(path, std::move(*db)));
  // Every call on db_ from here on is under mu_, as WaitWhileBusy needs.
  store->db_->SetBusyWait(
      [raw = store.get()](int n) { return raw->WaitWhileBusy(n); });
  if (create && reserve) {
    Status held = HoldReserve(path);
    store->reserve_held_ = held.ok();
    if (!held.ok()) {
      LogEvent(LogLevel::kWarn, "store.no_reserve",
               {{"store", path},
                {"error", held.message()},
                {"effect",
                 "a disk that fills up may cost this run the "
                 "record of how it ended"}});
    }
  }
  return store;
}

std::string Store::ReservePath(const std::string& db_path) {
  return db_path + "-reserve";
}

Status Store::HoldReserve(const std::string& db_path) {
  const std::string reserve = ReservePath(db_path);
  // Non-blocking: a FIFO put there fails to open instead of waiting for a
  // reader; a symlink is not followed.
  int fd = open(reserve.c_str(),
                O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(reserve, errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    close(fd);  // Not ours to grow (a hard link may be another file).
    return InvalidArgument(reserve +
                           " is not a regular file with one link; "
                           "remove it and steps makes it again");
  }
  const off_t size = static_cast<off_t>(kReserveBytes);
  // Blocks allocated, not a sparse file: deleting it frees them.
  int err = st.st_size >= size && st.st_blocks * 512 >= size
                ? 0
                : posix_fallocate(fd, 0, size);
  close(fd);
  if (err == 0) return Status::Ok();
  unlink(reserve.c_str());
  return ErrnoStatus("making " + reserve, err);
}

Status Store::Write(const std::function<Status(Db&)>& fn,
                    WaitUntil wait_until) {
  return group_.Submit(fn, wait_until);
}

void Store::WaitForLocksUntil(CancelToken abandon) {
  std::lock_guard<std::mutex> lock(mu_);
  abandon_ = std::move(abandon);
}

void Store::SetBusyPatience(std::chrono::milliseconds patience) {
  std::lock_guard<std::mutex> lock(mu_);
  busy_patience_ = patience;
}

std::chrono::milliseconds Store::busy_patience() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_patience_;
}

namespace {

std::string Seconds(std::chrono::steady_clock::duration d) {
  char text[32];
  snprintf(text, sizeof text, "%.1fs",
           std::chrono::duration<double>(d).count());
  return text;
}

// The sleep before the `n`-th look at a busy lock: short ones first
// (another run's commit takes milliseconds), then a tenth of a second, so
// that an abort is seen within that.
std::chrono::milliseconds BusySleep(int n) {
  static constexpr int kSleepMs[] = {1, 2, 5, 10, 20, 50};
  return std::chrono::milliseconds(n < 6 ? kSleepMs[n] : 100);
}

}  // namespace

bool Store::WaitWhileBusy(int n) {
  using std::chrono::milliseconds;
  const auto now = std::chrono::steady_clock::now();
  if (n == 0) statement_since_ = now;
  if (!busy_since_) {
    busy_since_ = now;
    ++busy_waits_;
  }
  if (in_batch_ && abandon_ && !db_->InTransaction()) {
    // A run's batch waits for the lock in rounds, with the store's lock let
    // go between them (WaitOn, CommitBatch): its begin fails at once.
    if (!abandon_->cancelled()) WarnIfBusyLong(now);
    return false;
  }
  if (batch_wait_until_ && now >= *batch_wait_until_) return false;
  if (!abandon_ || abandon_->cancelled()) {
    // The patience of a reader counts from its statement's start; that of
    // an interrupted run once, from its first wait since the interrupt,
    // and is shorter: whoever interrupted it waits for it to end.
    if (abandon_ && !interrupted_since_) interrupted_since_ = now;
    const auto since = abandon_ ? *interrupted_since_ : statement_since_;
    const auto patience =
        abandon_ ? std::min(busy_patience_, kInterruptedBusyPatience)
                 : busy_patience_;
    if (now - since >= patience) return false;
  } else {
    WarnIfBusyLong(now);
  }
  auto sleep = BusySleep(n);
  if (batch_wait_until_) {
    sleep = std::min(sleep, std::chrono::ceil<milliseconds>(
                                *batch_wait_until_ - now));
  }
  // Blocks the thread, not only a fiber: the store's lock is held.
  std::this_thread::sleep_for(sleep);
  return true;
}

void Store::WarnIfBusyLong(std::chrono::steady_clock::time_point now) {
  if (busy_warned_ || now - *busy_since_ < busy_patience_) return;
  busy_warned_ = true;
  LogEvent(LogLevel::kWarn, "store.busy",
           {{"store", path_},
            {"waited", Seconds(now - *busy_since_)},
            {"effect",
             "another process holds the store's write lock; the run "
             "waits for it (until interrupted, or a step's time is up)"}});
}

Store::WaitUntil Store::EarliestLimit(
    const std::vector<GroupCommit::Item*>& batch) {
  WaitUntil earliest;
  for (const GroupCommit::Item* item : batch) {
    if (item->wait_until && (!earliest || *item->wait_until < *earliest))
      earliest = item->wait_until;
  }
  return earliest;
}

void Store::SetBatchWait(const std::vector<GroupCommit::Item*>& batch) {
  batch_wait_until_ = EarliestLimit(batch);
}

void Store::EndBusyWait(bool gave_up) {
  batch_wait_until_.reset();
  busy_rounds_ = 0;
  busy_pause_ = std::chrono::milliseconds(0);
  const std::optional<std::chrono::steady_clock::time_point> since =
      busy_since_;
  busy_since_.reset();
  if (!busy_warned_) return;
  busy_warned_ = false;
  std::vector<LogField> fields = {
      {"store", path_},
      {"waited", Seconds(std::chrono::steady_clock::now() - *since)}};
  if (gave_up) {
    fields.push_back({"lock", "still held"});
    fields.push_back({"effect", "the writes that waited failed"});
  }
  LogEvent(LogLevel::kInfo, "store.busy_ended", fields);
}

void Store::WriteSoon(std::function<Status(Db&)> fn,
                      std::function<void(const Status&)> failed, size_t bytes,
                      Soon kind, WaitUntil wait_until) {
  if (!failed) failed = [this](const Status& s) { WarnWriteFailed(s); };
  if (kind == Soon::kPayload && disk_full_.load()) {
    // What room is left is for the records a run cannot end without; the
    // store.disk_full line said payloads are dropped from now on.
    return;
  }
  std::unique_lock<std::mutex> lock(soon_mu_);
  // Only payloads are dropped: records and ends are what a run's record
  // cannot do without, and there are a few per step.
  if (kind == Soon::kPayload &&
      (soon_.size() >= kMaxSoonWrites || soon_bytes_ + bytes > kMaxSoonBytes)) {
    // Commits keep failing to begin (another process holds the store, say):
    // memory stays bounded.
    lock.unlock();
    failed(IoError("the store's queue of writes is full (" +
                   std::to_string(kMaxSoonWrites) + " writes or " +
                   std::to_string(kMaxSoonBytes >> 20) +
                   " MiB not yet committed): this one is dropped"));
    return;
  }
  soon_.push_back({std::move(fn), std::move(failed), bytes, kind, {}});
  soon_bytes_ += bytes;
  // The flusher ticks on its own; waking it for each write would cost a
  // context switch per write. It is woken for the first end queued only.
  const bool wake = kind == Soon::kEnd && !end_due_;
  if (wake) end_due_ = std::chrono::steady_clock::now() + kEndLinger;
  if (!flusher_.joinable() && !stopping_) {
    flusher_ = std::thread([this] { FlusherLoop(); });
  }
  // Only a payload's writer pays for the queue's bound; a record's or an
  // end's (a process group's removal, a step's end) never waits here.
  const bool full =
      kind == Soon::kPayload &&
      (soon_.size() >= kSoonFlushWrites || soon_bytes_ >= kSoonFlushBytes);
  lock.unlock();
  if (wake) soon_cv_.notify_all();
  if (!full || held_elsewhere_.load()) return;
  // The writer waits for the disk, as with Write: a chatty task is slowed to
  // its pace. Not for another process's lock: while one holds the store,
  // payloads stay queued (up to kMaxSoonWrites or kMaxSoonBytes), and the
  // task is not held.
  WaitUntil limit = std::chrono::steady_clock::now() + kFullQueueWait;
  if (wait_until && *wait_until < *limit) limit = wait_until;
  (void)Flush(limit);
}

void Store::WarnWriteFailed(const Status& s) {
  if (s.ok() || warned_.exchange(true)) return;
  LogEvent(LogLevel::kWarn, "store.write_failed",
           {{"store", path_}, {"error", s.message()}});
}

Status Store::Flush(WaitUntil wait_until) {
  {
    std::lock_guard<std::mutex> lock(soon_mu_);
    if (soon_.empty()) return Status::Ok();
  }
  static const std::function<Status(Db&)> kNothing = [](Db&) {
    return Status::Ok();
  };
  return group_.Submit(kNothing, wait_until);
}

void Store::FlusherLoop() {
  // Every kSoonLinger, and when an end queued has waited kEndLinger,
  // commits what is queued, unless a Write took it.
  using std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(soon_mu_);
  steady_clock::time_point tick = steady_clock::now() + kSoonLinger;
  while (!stopping_) {
    const steady_clock::time_point due =
        end_due_ ? std::min(*end_due_, tick) : tick;
    soon_cv_.wait_until(lock, due);
    if (stopping_) break;
    const steady_clock::time_point now = steady_clock::now();
    const bool end_due = end_due_ && now >= *end_due_;
    if (now >= tick) {
      tick = now + kSoonLinger;
    } else if (!end_due) {
      continue;  // Woken for an end queued: wait until it is due.
    }
    if (soon_.empty()) continue;
    lock.unlock();
    (void)Flush();  // A failed write reports through its own callback.
    lock.lock();
  }
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(soon_mu_);
    stopping_ = true;
  }
  soon_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  (void)Flush();
}

int64_t Store::commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commits_;
}

namespace {

// A write's status; an exception it throws is an error of its own, never
// the committing thread's (another writer's).
Status RunWrite(const std::function<Status(Db&)>& write, Db& db) {
  try {
    return write(db);
  } catch (const std::exception& e) {
    return Internal(std::string("store write failed: ") + e.what());
  } catch (...) {
    return Internal("store write failed");
  }
}

}  // namespace

std::vector<Store::SoonWrite> Store::TakeSoon() {
  std::vector<SoonWrite> soon;
  std::lock_guard<std::mutex> lock(soon_mu_);
  soon.swap(soon_);
  soon_bytes_ = 0;
  end_due_.reset();
  return soon;
}

void Store::Requeue(std::vector<SoonWrite> soon) {
  if (soon.empty()) return;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(soon_mu_);
    for (const SoonWrite& w : soon) {
      soon_bytes_ += w.bytes;
      // An end put back is due again a kEndLinger from now.
      if (w.kind == Soon::kEnd && !end_due_) {
        end_due_ = std::chrono::steady_clock::now() + kEndLinger;
        wake = true;
      }
    }
    soon.insert(soon.end(), std::make_move_iterator(soon_.begin()),
                std::make_move_iterator(soon_.end()));
    soon_.swap(soon);
  }
  if (wake) soon_cv_.notify_all();
}

Status Store::InSavepoint(const std::function<Status(Db&)>& write) {
  Status s = db_->Run("SAVEPOINT steps_write");
  if (!s.ok()) return s;
  s = RunWrite(write, *db_);
  if (!s.ok()) (void)RoomFreed();  // Before the rollback resets the error.
  if (!s.ok() && db_->InTransaction()) {
    (void)db_->Run("ROLLBACK TO steps_write");
  }
  if (db_->InTransaction()) (void)db_->Run("RELEASE steps_write");
  return s;
}

bool Store::RoomFreed() {
  if (!db_->LastErrorWasDiskFull()) return false;
  bool freed = false;
  if (reserve_held_) {
    reserve_held_ = false;
    // Another run on this state folder may have deleted it first.
    freed = unlink(ReservePath(path_).c_str()) == 0;
  }
  EnterDiskFull(freed);
  return freed;
}

void Store::EnterDiskFull(bool freed) {
  if (disk_full_.exchange(true)) return;
  // A checkpoint would grow the database file into the room freed for
  // records (and fail halfway, keeping what it took): from now on the log
  // alone grows, by the pages each record needs.
  (void)db_->Exec("PRAGMA wal_autocheckpoint = 0");
  LogEvent(
      LogLevel::kWarn, "store.disk_full",
      {{"store", path_},
       {"reserve_freed", freed ? kReserveBytes : size_t{0}},
       {"dropping",
        "output lines and cache entries; the ends of attempts "
        "and steps keep the last " +
            std::to_string(kFullDiskOutputBytes) + " bytes of their output"}});
}

namespace {

Status Lost(const Status& s) {
  return s.ok() ? IoError("sqlite: the transaction was rolled back") : s;
}

}  // namespace

bool Store::TryCommit(std::vector<GroupCommit::Item*>& batch,
                      std::vector<SoonWrite>& soon, Status& why) {
  Transaction tx(*db_);
  if (!tx.begun().ok()) {
    begin_busy_ = db_->LastErrorWasBusy();
    // Nothing was written: the queued writes wait for the next commit.
    for (GroupCommit::Item* item : batch) item->status = tx.begun();
    Requeue(std::move(soon));
    soon.clear();
    return true;
  }
  // The attempt ends when SQLite gave the transaction up, or when the disk
  // filled during it: the payloads written before would take, at COMMIT,
  // the room just freed for records (CommitBatch tries again without them).
  const bool was_full = disk_full_.load();
  auto lost = [&](const Status& s) {
    if (db_->InTransaction() && (was_full || !disk_full_.load())) return false;
    why = Lost(s);
    return true;
  };
  for (SoonWrite& w : soon) {
    if (w.kind == Soon::kPayload && disk_full_.load()) {
      w.failed = nullptr;  // Queued before the disk filled: dropped.
      continue;
    }
    w.status = InSavepoint(w.write);
    if (lost(w.status)) return false;
  }
  for (GroupCommit::Item* item : batch) {
    item->status = InSavepoint(*item->write);
    if (lost(item->status)) return false;
  }
  if (Status committed = tx.Commit(); !committed.ok()) {
    (void)RoomFreed();  // The retry (CommitBatch) may then fit.
    why = committed;
    return false;
  }
  Committed();
  for (SoonWrite& w : soon) {
    if (!w.status.ok() && w.failed) w.failed(w.status);
  }
  return true;
}

void Store::CommitBatch(std::vector<GroupCommit::Item*>& batch) {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_pause_.count() > 0) {
    // The last round found another process holding the write lock. The
    // pause before the next is taken with the store's lock let go: a reader
    // (the step cache's lookup, before an attempt starts) is never held
    // behind a write that waits with no time limit.
    auto pause = std::exchange(busy_pause_, std::chrono::milliseconds(0));
    if (const WaitUntil limit = EarliestLimit(batch)) {
      pause = std::min(pause, std::chrono::ceil<std::chrono::milliseconds>(
                                  *limit - std::chrono::steady_clock::now()));
    }
    lock.unlock();
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    lock.lock();
  }
  // A run's batch whose begin finds the lock held is tried again in rounds
  // (WaitOn) until the earliest time limit in it is up: the writes whose
  // time it was fail, and the rest are queued again. A store with no run
  // waits within the begin, its patience.
  SetBatchWait(batch);
  begin_busy_ = false;
  in_batch_ = true;
  CommitWaiting(batch);
  in_batch_ = false;
  if (begin_busy_) held_elsewhere_.store(true);
  if (!begin_busy_) {
    EndBusyWait(false);
  } else if (!WaitOn(batch)) {
    EndBusyWait(true);  // The lock is still held: the writes failed.
  }
}

bool Store::WaitOn(std::vector<GroupCommit::Item*>& batch) {
  if (!abandon_) return false;
  using std::chrono::milliseconds;
  const auto now = std::chrono::steady_clock::now();
  // The next round comes after the next sleep of the schedule, or when the
  // first time limit is up (a write's, or an interrupted run's patience).
  std::optional<std::chrono::steady_clock::time_point> next;
  if (abandon_->cancelled()) {
    if (!interrupted_since_) interrupted_since_ = now;
    next = *interrupted_since_ +
           std::min(busy_patience_, kInterruptedBusyPatience);
    if (now >= *next) return false;  // The writes fail, busy.
  }
  bool again = false;
  for (GroupCommit::Item* item : batch) {
    item->again = !item->wait_until || *item->wait_until > now;
    if (!item->again) item->status = LockHeldPastWriteTime();
    if (item->again && item->wait_until && (!next || *item->wait_until < *next))
      next = item->wait_until;
    again = again || item->again;
  }
  if (!again) return false;
  busy_pause_ = BusySleep(busy_rounds_++);
  if (next) {
    busy_pause_ = std::min(
        busy_pause_, std::chrono::ceil<milliseconds>(*next - now));
  }
  busy_pause_ = std::max(busy_pause_, milliseconds(1));
  return true;
}

void Store::CommitWaiting(std::vector<GroupCommit::Item*>& batch) {
  std::vector<SoonWrite> soon = TakeSoon();
  if (batch.size() == 1 && soon.empty()) {  // The usual case: no savepoint.
    CommitAlone(*batch[0]);
    return;
  }
  Status why;
  if (TryCommit(batch, soon, why)) return;
  // The transaction was lost. The payloads go (reported), and what the
  // run's state needs is tried once more: on a full disk the rollback has
  // freed the room the payloads took.
  std::vector<SoonWrite> kept;
  for (SoonWrite& w : soon) {
    if (w.kind == Soon::kPayload) {
      if (!disk_full_.load()) w.failed(why);  // Else store.disk_full said so.
    } else {
      kept.push_back(std::move(w));
    }
  }
  if (TryCommit(batch, kept, why)) return;
  for (GroupCommit::Item* item : batch) item->status = why;
  for (SoonWrite& w : kept) w.failed(why);
}

void Store::CommitAlone(GroupCommit::Item& item) {
  for (int tries = 1;; ++tries) {
    bool again = false;
    {
      Transaction tx(*db_);
      item.status = tx.begun();
      if (!item.status.ok()) begin_busy_ = db_->LastErrorWasBusy();
      if (item.status.ok()) item.status = RunWrite(*item.write, *db_);
      if (item.status.ok()) item.status = tx.Commit();
      if (item.status.ok()) {
        Committed();
        return;
      }
      again = RoomFreed() && tries == 1;  // Before the rollback.
    }
    if (!again) return;
  }
}

void Store::Committed() {
  held_elsewhere_.store(false);
  ++commits_;
  if (after_commit_) after_commit_(commits_);
}

void Store::SetAfterCommit(std::function<void(int64_t)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  after_commit_ = std::move(hook);
}

Status Store::Read(const std::function<Status(Db&)>& fn) {
  (void)Flush();  // A failed write reports through its own callback.
  return ReadCommitted(fn);
}

Status Store::ReadCommitted(const std::function<Status(Db&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  // A read may come between two rounds of a batch's wait (LeadOneBatch):
  // only a wait of its own ends with it.
  const bool writes_waiting = busy_since_.has_value();
  Status read = fn(*db_);
  if (!writes_waiting) EndBusyWait(!read.ok() && db_->LastErrorWasBusy());
  return read;
}

}  // namespace steps::store
