// The store's file: schema, pragmas, versioning and transactions.
#include "store/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/log_capture.h"
#include "store/cache.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using store_testing::HeldStore;
using store_testing::TempDir;

std::set<std::string> Names(Store& store, const std::string& type) {
  std::set<std::string> names;
  EXPECT_TRUE(store
                  .Read([&](Db& db) -> Status {
                    Result<StatementUse> st = db.Prepared(
                        "SELECT name FROM sqlite_master WHERE type = ?1");
                    if (!st.ok()) return st.status();
                    (*st)->Bind(1, type);
                    while (true) {
                      Result<bool> row = (*st)->Step();
                      if (!row.ok()) return row.status();
                      if (!*row) return Status::Ok();
                      names.insert((*st)->Text(0));
                    }
                  })
                  .ok());
  return names;
}

int64_t Count(Store& store, const std::string& sql) {
  int64_t n = -1;
  EXPECT_TRUE(store
                  .Read([&](Db& db) -> Status {
                    Result<StatementUse> st = db.Prepared(sql);
                    if (!st.ok()) return st.status();
                    Result<bool> row = (*st)->Step();
                    if (!row.ok()) return row.status();
                    if (*row) n = (*st)->Int(0);
                    return Status::Ok();
                  })
                  .ok());
  return n;
}

std::string PragmaText(Store& store, const std::string& pragma) {
  std::string value;
  EXPECT_TRUE(store
                  .Read([&](Db& db) -> Status {
                    Result<StatementUse> st = db.Prepared("PRAGMA " + pragma);
                    if (!st.ok()) return st.status();
                    Result<bool> row = (*st)->Step();
                    if (!row.ok()) return row.status();
                    if (*row) value = (*st)->Text(0);
                    return Status::Ok();
                  })
                  .ok());
  return value;
}

TEST(StoreTest, OpenCreatesTheFileTheFolderAndTheSchema) {
  TempDir dir;
  const std::string path = StorePath(dir / "state/nested");
  Result<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(Names(**store, "table"),
            (std::set<std::string>{
                "agent_turns", "attempts", "cache", "conversation_log", "gates",
                "jobs", "output_lines", "process_groups", "run_interruptions",
                "runs", "slurm_jobs", "steps"}));
  EXPECT_EQ(Names(**store, "view"), std::set<std::string>{"hooks"});
  EXPECT_EQ(PragmaText(**store, "journal_mode"), "wal");
  EXPECT_EQ(PragmaText(**store, "user_version"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(PragmaText(**store, "foreign_keys"), "1");
}

TEST(StoreTest, ReopeningKeepsWhatWasWritten) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([](Db& db) {
                      return db.Exec(
                          "INSERT INTO runs (id, file, status, started_ms,"
                          " taken_by, host, pid, pid_start) VALUES ('r1',"
                          " 'f.yaml', 'succeeded', 1, 'u@h', 'h', 1, '')");
                    })
                    .ok());
  }
  auto again = Store::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(Count(**again, "SELECT count(*) FROM runs"), 1);
}

TEST(StoreTest, AStoreFromANewerStepsIsRefused) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(
        (*store)
            ->Read([](Db& db) { return db.Exec("PRAGMA user_version = 99"); })
            .ok());
  }
  auto again = Store::Open(path);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("newer steps"), std::string::npos)
      << again.status().message();
}

TEST(StoreTest, OpenExistingDoesNotCreateAStore) {
  TempDir dir;
  auto store = Store::OpenExisting(StorePath(dir.path()));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(StorePath(dir.path())));
}

TEST(StoreTest, AWriteThatFailsLeavesNothingBehind) {
  TempDir dir;
  auto store = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(store.ok());
  Status s = (*store)->Write([](Db& db) -> Status {
    Status first = db.Exec(
        "INSERT INTO runs (id, file, status, started_ms, taken_by, host, pid,"
        " pid_start) VALUES ('r1', 'f', 'running', 1, 'u@h', 'h', 1, '')");
    if (!first.ok()) return first;
    return Internal("the second half of the event failed");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM runs"), 0);

  // A statement that breaks a constraint rolls back the whole event too.
  s = (*store)->Write([](Db& db) -> Status {
    Status first = db.Exec(
        "INSERT INTO runs (id, file, status, started_ms, taken_by, host, pid,"
        " pid_start) VALUES ('r2', 'f', 'running', 1, 'u@h', 'h', 1, '')");
    if (!first.ok()) return first;
    return db.Exec(
        "INSERT INTO jobs (run_id, name, status, started_ms) VALUES"
        " ('no-such-run', 'j', 'running', 1)");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM runs"), 0);
}

TEST(StoreTest, ASecondConnectionSeesOnlyCommittedEvents) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto writer = Store::Open(path);
  auto reader = Store::OpenExisting(path);
  ASSERT_TRUE(writer.ok() && reader.ok());
  Status s = (*writer)->Write([&](Db& db) -> Status {
    Status insert = db.Exec(
        "INSERT INTO runs (id, file, status, started_ms, taken_by, host, pid,"
        " pid_start) VALUES ('r1', 'f', 'running', 1, 'u@h', 'h', 1, '')");
    if (!insert.ok()) return insert;
    // Inside the open transaction, the other connection sees nothing yet.
    EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 0);
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 1);
}

Status InsertRun(Db& db, const std::string& id) {
  return db.Exec(
      "INSERT INTO runs (id, file, status, started_ms, taken_by, host, pid,"
      " pid_start) VALUES ('" +
      id + "', 'f', 'running', 1, 'u@h', 'h', 1, '')");
}

TEST(StoreSoonTest, AWriteSoonRidesWithTheNextWriteInOneTransaction) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto writer = Store::Open(path);
  auto reader = Store::OpenExisting(path);
  ASSERT_TRUE(writer.ok() && reader.ok());
  const int64_t commits = (*writer)->commits();
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "soon"); });
  EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 0);
  ASSERT_TRUE(
      (*writer)->Write([](Db& db) { return InsertRun(db, "now"); }).ok());
  EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ((*writer)->commits(), commits + 1);
  // Queued first, written first: its row precedes the write's.
  EXPECT_EQ(Count(**reader, "SELECT rowid FROM runs WHERE id = 'soon'"), 1);
}

TEST(StoreSoonTest, TheFlusherCommitsAWriteSoonThatNoWriteFollows) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto writer = Store::Open(path);
  auto reader = Store::OpenExisting(path);
  ASSERT_TRUE(writer.ok() && reader.ok());
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "soon"); });
  // kSoonLinger is 100 ms; 10 s leaves room for a loaded machine.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Count(**reader, "SELECT count(*) FROM runs") == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 1);
}

TEST(StoreSoonTest, ReadFlushAndClosingCommitWhatIsQueued) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto writer = Store::Open(path);
  ASSERT_TRUE(writer.ok());
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "a"); });
  EXPECT_EQ(Count(**writer, "SELECT count(*) FROM runs"), 1);  // Read.
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "b"); });
  EXPECT_TRUE((*writer)->Flush().ok());
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "c"); });
  writer->reset();  // Closing.
  auto reader = Store::OpenExisting(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 3);
}

TEST(StoreSoonTest, AFailureUndoesOnlyItsOwnWriteAndIsReported) {
  TempDir dir;
  auto store = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(store.ok());
  std::vector<std::string> failures;
  auto report = [&](const Status& s) { failures.push_back(s.message()); };
  (*store)->WriteSoon([](Db& db) { return InsertRun(db, "kept-1"); }, report);
  (*store)->WriteSoon(
      [](Db& db) -> Status {
        if (Status s = InsertRun(db, "undone"); !s.ok()) return s;
        return Internal("the soon write failed");
      },
      report);
  (*store)->WriteSoon([](Db& db) { return InsertRun(db, "kept-2"); }, report);
  // The write they ride with fails too, and takes only itself back.
  Status s = (*store)->Write([](Db& db) -> Status {
    if (Status i = InsertRun(db, "undone-too"); !i.ok()) return i;
    return Internal("the write failed");
  });
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "the soon write failed");
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM runs WHERE id LIKE 'kept-%'"),
            2);
}

TEST(StoreSoonTest, ALostTransactionDropsThePayloadsAndKeepsTheRest) {
  // SQLite rolls a whole transaction back on a full disk or an I/O error,
  // savepoints or not; a payload that ends the transaction itself stands
  // in for that here.
  TempDir dir;
  auto store = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(store.ok());
  std::vector<std::string> failures;
  auto report = [&](const Status& s) { failures.push_back(s.message()); };
  (*store)->WriteSoon([](Db& db) { return InsertRun(db, "record"); }, report);
  (*store)->WriteSoon(
      [](Db& db) -> Status {
        if (Status s = InsertRun(db, "payload"); !s.ok()) return s;
        (void)db.Exec("ROLLBACK");
        return IoError("database or disk is full");
      },
      report, 100, Store::Soon::kPayload);
  Status s = (*store)->Write([](Db& db) { return InsertRun(db, "durable"); });
  EXPECT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "database or disk is full");
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(Count(**store,
                  "SELECT count(*) FROM runs WHERE id IN"
                  " ('record', 'durable')"),
            2);
}

TEST(StoreSoonTest, PastItsByteBoundTheQueueIsCommittedByTheWriter) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto writer = Store::Open(path);
  auto reader = Store::OpenExisting(path);
  ASSERT_TRUE(writer.ok() && reader.ok());
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "small"); });
  (*writer)->WriteSoon([](Db& db) { return InsertRun(db, "big"); }, nullptr,
                       Store::kSoonFlushBytes, Store::Soon::kPayload);
  // Committed before WriteSoon returned, not at the flusher's next tick.
  EXPECT_EQ(Count(**reader, "SELECT count(*) FROM runs"), 2);
}

TEST(StoreReserveTest, AWritingStoreKeepsRoomBesideItAndAReaderMakesNone) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  const std::string reserve = Store::ReservePath(path);
  {
    auto writer = Store::Open(path);
    ASSERT_TRUE(writer.ok());
  }
  struct stat st;
  ASSERT_EQ(stat(reserve.c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), Store::kReserveBytes);
  // Allocated, not sparse: deleting it frees that much.
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, Store::kReserveBytes);
  ASSERT_EQ(unlink(reserve.c_str()), 0);
  {
    auto reader = Store::OpenExisting(path);
    ASSERT_TRUE(reader.ok());
  }
  EXPECT_NE(stat(reserve.c_str(), &st), 0);
  auto writer = Store::Open(path);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ(stat(reserve.c_str(), &st), 0);
}

// What sits where the reserve goes and is not a file of the store's own
// is left as it is, and said: a FIFO (opening it to write would wait for
// a reader), a hard link to another file (growing it would grow that).
TEST(StoreReserveTest, AFifoOrAHardLinkInItsPlaceIsLeftAloneAndSaid) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  const std::string reserve = Store::ReservePath(path);
  ASSERT_TRUE(Store::Open(path).ok());
  ASSERT_EQ(unlink(reserve.c_str()), 0);
  ASSERT_EQ(mkfifo(reserve.c_str(), 0600), 0);
  {
    test_support::LogCapture log;
    auto store = Store::Open(path);  // Returns: no reader is waited for.
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(log.LinesWith("store.no_reserve").size(), 1u);
  }
  struct stat st;
  ASSERT_EQ(lstat(reserve.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(unlink(reserve.c_str()), 0);
  const std::string other = dir.path() + "/other";
  dir.Write("other", "not the store's");
  ASSERT_EQ(link(other.c_str(), reserve.c_str()), 0);
  {
    test_support::LogCapture log;
    ASSERT_TRUE(Store::Open(path).ok());
    ASSERT_EQ(log.LinesWith("store.no_reserve").size(), 1u);
    EXPECT_NE(log.LinesWith("store.no_reserve")[0].find("one link"),
              std::string::npos);
  }
  ASSERT_EQ(stat(other.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 15);
}

// SQLite answers SQLITE_FULL when a write would pass the connection's
// max_page_count, as it does when the disk is full.
TEST(StoreReserveTest, AFullDiskFreesTheReserveAndDropsPayloadsFromThen) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  test_support::LogCapture log;
  // Room for a small row more, not for a 64 KiB one.
  const int64_t pages = Count(**store, "PRAGMA page_count");
  ASSERT_GT(pages, 0);
  ASSERT_TRUE((*store)
                  ->Read([&](Db& db) {
                    return db.Exec("PRAGMA max_page_count = " +
                                   std::to_string(pages + 1));
                  })
                  .ok());
  EXPECT_FALSE((*store)->disk_full());
  std::vector<std::string> failures;
  auto report = [&](const Status& s) { failures.push_back(s.message()); };
  const std::string big(64 * 1024, 'x');
  (*store)->WriteSoon([&](Db& db) { return InsertRun(db, big); }, report, 100,
                      Store::Soon::kPayload);
  Status s = (*store)->Write([](Db& db) { return InsertRun(db, "durable"); });
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE((*store)->disk_full());
  // The payload that found the disk full is dropped, said by the one
  // store.disk_full line, not by a report of its own.
  EXPECT_TRUE(failures.empty());
  struct stat st;
  EXPECT_NE(stat(Store::ReservePath(path).c_str(), &st), 0);
  EXPECT_EQ(log.LinesWith("store.disk_full").size(), 1u);
  // From then on a payload is dropped at once, unreported (the disk_full
  // line said so); a record still rides.
  (*store)->WriteSoon([](Db& db) { return InsertRun(db, "payload"); }, report,
                      10, Store::Soon::kPayload);
  (*store)->WriteSoon([](Db& db) { return InsertRun(db, "record"); }, report);
  EXPECT_TRUE((*store)->Flush().ok());
  EXPECT_TRUE(failures.empty());
  EXPECT_EQ(Count(**store,
                  "SELECT count(*) FROM runs WHERE id IN"
                  " ('durable', 'record')"),
            2);
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(log.LinesWith("store.disk_full").size(), 1u);
  EXPECT_TRUE(log.LinesWith("store.write_failed").empty());
}

// A store written before version 3: its steps and cache tables lack the
// columns added since. It opens, gains them, and its old cache entry is
// listed but never found.
TEST(StoreTest, AVersionTwoStoreOpensAndItsOldCacheEntriesNeverMatch) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  const std::string key(64, 'a');
  {
    auto db = Db::Open(path, true);
    ASSERT_TRUE(db.ok()) << db.status().message();
    ASSERT_TRUE(
        (*db)
            ->Exec("CREATE TABLE steps (run_id TEXT NOT NULL, step_id TEXT NOT"
                   " NULL, job TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT"
                   " NULL, hook TEXT, fixer INTEGER NOT NULL DEFAULT 0, line"
                   " INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, error"
                   " TEXT NOT NULL DEFAULT '', output TEXT NOT NULL DEFAULT '',"
                   " started_ms INTEGER NOT NULL, duration_ms INTEGER,"
                   " deadline_ms INTEGER, identity TEXT NOT NULL DEFAULT '',"
                   " cached INTEGER NOT NULL DEFAULT 0, start_seq INTEGER NOT"
                   " NULL, end_seq INTEGER, agent_turns INTEGER,"
                   " provider_requests INTEGER, prompt_tokens INTEGER,"
                   " completion_tokens INTEGER, usd REAL, nudge_sent INTEGER,"
                   " deadline_disclosed INTEGER, fallbacks_taken TEXT, PRIMARY"
                   " KEY (run_id, step_id));"
                   "CREATE TABLE cache (key TEXT PRIMARY KEY, run_id TEXT NOT"
                   " NULL, step_id TEXT NOT NULL, output TEXT NOT NULL, outputs"
                   " TEXT NOT NULL, created_ms INTEGER NOT NULL);"
                   "INSERT INTO cache VALUES ('" +
                   key +
                   "', 'old-run', 'j:1', 'hello', '[]', 1);"
                   "PRAGMA user_version = 2;")
            .ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(PragmaText(**store, "user_version"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(Count(**store,
                  "SELECT count(*) FROM sqlite_master"
                  " WHERE name = 'conversation_log'"),
            1);
  EXPECT_EQ(Count(**store,
                  "SELECT count(*) FROM pragma_table_info('steps')"
                  " WHERE name LIKE 'cached_from_%' OR name = 'cell'"),
            3);
  // Version 6: the run's pipeline file, and its interruptions.
  EXPECT_EQ(Count(**store,
                  "SELECT count(*) FROM pragma_table_info('runs')"
                  " WHERE name IN ('file_hash', 'file_text')"),
            2);
  EXPECT_EQ(Count(**store,
                  "SELECT count(*) FROM sqlite_master"
                  " WHERE name = 'run_interruptions'"),
            1);
  // Version 7: gate steps and their decisions.
  EXPECT_EQ(
      Count(**store, "SELECT count(*) FROM sqlite_master WHERE name = 'gates'"),
      1);
  StoreStepCache cache(**store, CacheDir(dir.path()), "new-run", true);
  EXPECT_FALSE(cache.Find(key).has_value());
  auto entries = ListCacheEntries(**store);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_FALSE((*entries)[0].usable);
  // Remembered anew under the same key, the entry is found.
  pipeline::StepRef ref;
  ref.id = "j:1";
  ref.name = "a";
  pipeline::CachedStep result;
  result.output = "hello\n";
  result.exit_code = 0;
  result.lines = {{OutputStream::kStderr, std::string("a\0b:c", 5)}};
  cache.Remember(key, ref, result);
  std::optional<pipeline::CachedStep> hit = cache.Find(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->output, "hello\n");
  EXPECT_EQ(hit->exit_code, 0);
  EXPECT_EQ(hit->from_run, "new-run");
  EXPECT_EQ(hit->from_step, "j:1");
  ASSERT_EQ(hit->lines.size(), 1u);
  EXPECT_EQ(hit->lines[0].stream, OutputStream::kStderr);
  EXPECT_EQ(hit->lines[0].text, std::string("a\0b:c", 5));
  // A second open finds everything in place.
  store->reset();
  EXPECT_TRUE(Store::Open(path).ok());
}

}  // namespace
}  // namespace steps::store

namespace steps::store {
namespace {

// Inserts `x` into table t of `store`, then fails when `fail` is set.
Status InsertInto(Db& db, int x, bool fail) {
  Result<StatementUse> st = db.Prepared("INSERT INTO t (x) VALUES (?1)");
  if (!st.ok()) return st.status();
  (*st)->Bind(1, int64_t{x});
  if (Status s = (*st)->Run(); !s.ok()) return s;
  return fail ? Internal("write " + std::to_string(x) + " refused")
              : Status::Ok();
}

// Writes that queue behind one being committed share the next
// transaction; each returns only once its own write is committed, and one
// that fails undoes only its own rows, not its batch's.
TEST(GroupCommitTest, QueuedWritesShareOneTransactionEachUndoingOnlyItsOwn) {
  TempDir dir;
  auto opened = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Store& store = **opened;
  ASSERT_TRUE(
      store.Write([](Db& db) { return db.Exec("CREATE TABLE t (x)"); }).ok());
  const int64_t before = store.commits();

  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool release = false;
  std::thread first([&] {
    EXPECT_TRUE(store
                    .Write([&](Db& db) {
                      std::unique_lock<std::mutex> lock(mu);
                      entered = true;
                      cv.notify_all();
                      cv.wait(lock, [&] { return release; });
                      return InsertInto(db, 0, false);
                    })
                    .ok());
  });
  // Only once the first write holds its transaction open do three more
  // arrive, so they queue behind it rather than lead a batch of their own.
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  std::vector<Status> statuses(4);
  std::vector<std::thread> queued;
  for (int i = 1; i <= 3; ++i) {
    queued.emplace_back([&, i] {
      statuses[i] =
          store.Write([i](Db& db) { return InsertInto(db, i, i == 2); });
    });
  }
  store.WaitForQueuedWrites(3);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  first.join();
  for (std::thread& t : queued) t.join();

  EXPECT_TRUE(statuses[1].ok()) << statuses[1].message();
  EXPECT_FALSE(statuses[2].ok());
  EXPECT_EQ(statuses[2].message(), "write 2 refused");
  EXPECT_TRUE(statuses[3].ok()) << statuses[3].message();
  std::string rows;
  ASSERT_TRUE(store
                  .Read([&](Db& db) -> Status {
                    Result<StatementUse> st = db.Prepared(
                        "SELECT group_concat(x) FROM (SELECT x FROM t ORDER"
                        " BY x)");
                    if (!st.ok()) return st.status();
                    Result<bool> row = (*st)->Step();
                    if (!row.ok()) return row.status();
                    rows = (*st)->Text(0);
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(rows, "0,1,3");
  EXPECT_EQ(store.commits() - before, 2);  // The first, then one batch.
}

// Many writers at once: every write that succeeded is there, once.
TEST(GroupCommitTest, ConcurrentWritersLoseNothing) {
  TempDir dir;
  auto opened = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Store& store = **opened;
  ASSERT_TRUE(
      store.Write([](Db& db) { return db.Exec("CREATE TABLE t (x)"); }).ok());
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 100; ++i) {
        const int x = w * 1000 + i;
        if (!store.Write([x](Db& db) { return InsertInto(db, x, x % 7 == 0); })
                 .ok())
          ++failed;
      }
    });
  }
  for (std::thread& t : writers) t.join();
  int expected_failed = 0;
  for (int w = 0; w < 8; ++w)
    for (int i = 0; i < 100; ++i) expected_failed += (w * 1000 + i) % 7 == 0;
  EXPECT_EQ(failed.load(), expected_failed);
  EXPECT_EQ(Count(store, "SELECT count(*) FROM t"), 800 - expected_failed);
  EXPECT_EQ(Count(store, "SELECT count(*) FROM t WHERE x % 7 = 0"), 0);
  EXPECT_EQ(Count(store, "SELECT count(DISTINCT x) FROM t"),
            800 - expected_failed);
}

// A cache lookup of a key this run did not remember reads what is
// committed and leaves the queue alone (an attempt's end waiting there
// rides with the next write); a key it remembered commits the queue first,
// so the entry is found.
TEST(StoreTest, ACacheLookupCommitsTheQueueOnlyForAKeyItRemembered) {
  TempDir dir;
  auto store = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status().message();
  Store& s = **store;
  StoreStepCache cache(s, CacheDir(dir.path()), "run", true);
  ASSERT_TRUE(s.Write([](Db& db) {
                 return db.Exec("CREATE TABLE marks (n INTEGER)");
               }).ok());
  auto marks = [&] {
    int64_t n = -1;
    EXPECT_TRUE(s.ReadCommitted([&](Db& db) -> Status {
                   Result<StatementUse> st =
                       db.Prepared("SELECT count(*) FROM marks");
                   if (!st.ok()) return st.status();
                   Result<bool> row = (*st)->Step();
                   if (!row.ok()) return row.status();
                   n = (*st)->Int(0);
                   return Status::Ok();
                 }).ok());
    return n;
  };
  // The flusher commits the queue at its own tick (every 100 ms) too: a
  // trial it cut into is tried again.
  bool left_alone = false;
  for (int trial = 0; trial < 3 && !left_alone; ++trial) {
    const int64_t before = marks();
    s.WriteSoon([](Db& db) { return db.Exec("INSERT INTO marks VALUES (1)"); });
    EXPECT_FALSE(cache.Find("never-remembered").has_value());
    left_alone = marks() == before;
    ASSERT_TRUE(s.Flush().ok());
  }
  EXPECT_TRUE(left_alone) << "a lookup of another key committed the queue";

  pipeline::StepRef ref;
  ref.id = "j:1";
  ref.name = "a";
  pipeline::CachedStep result;
  result.output = "hello\n";
  result.exit_code = 0;
  cache.Remember("remembered", ref, result);
  std::optional<pipeline::CachedStep> hit = cache.Find("remembered");
  ASSERT_TRUE(hit.has_value()) << "the queued entry is committed and found";
  EXPECT_EQ(hit->output, "hello\n");
}

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A store (`store()`), the lock another process holds on it (`held_`,
// taken as each test starts), and what the store logs (`logs_`). A test
// that writes as a run does calls ForRun first.
class StoreBusyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(path_);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
    held_.emplace(path_);
  }
  void TearDown() override {
    if (held_) held_->Release();
  }

  Store& store() { return *store_; }
  // The store's writes wait for locks as a run's do, until `abort_`.
  void ForRun() { store_->WaitForLocksUntil(abort_); }
  // Writes run `id`, with `wait_until`.
  Status WriteRun(const std::string& id,
                  Store::WaitUntil wait_until = std::nullopt) {
    return store_->Write([&](Db& db) { return InsertRun(db, id); },
                         wait_until);
  }
  // Writes run r1 on a thread of its own, into `written`.
  std::thread WriteInBackground(Status& written) {
    return std::thread([this, &written] { written = WriteRun("r1"); });
  }
  // Waits (generously: ten seconds) for a line with `text` to be logged.
  bool LoggedSoon(const std::string& text) {
    return logs_.WaitFor(text, std::chrono::seconds(10));
  }
  // Lets the lock go (once).
  void Release() {
    held_->Release();
    held_.reset();
  }

  TempDir dir_;
  const std::string path_ = StorePath(dir_.path());
  std::unique_ptr<Store> store_;
  std::optional<HeldStore> held_;
  CancelToken abort_;
  test_support::LogCapture logs_;
};

// A run's write waits for a lock another process holds, past the patience
// a reader has (which used to fail it: the attempt it recorded then ran
// unrecorded), says so once, and commits when the lock is let go.
TEST_F(StoreBusyTest, ARunsWriteWaitsForAnotherProcesssLockAndCommits) {
  store().SetBusyPatience(milliseconds(50));
  ForRun();
  Status written = Internal("not yet");
  std::thread run = WriteInBackground(written);
  ASSERT_TRUE(LoggedSoon("WRN store.busy "));
  Release();
  run.join();
  EXPECT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(Count(store(), "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(logs_.LinesWith("WRN store.busy ").size(), 1u);
  const std::vector<std::string> ended =
      logs_.LinesWith("INF store.busy_ended ");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].find("still held"), std::string::npos) << ended[0];
  EXPECT_EQ(store().busy_waits(), 1);
}

// A write with a time limit (an attempt's deadline) waits no longer: it
// fails, busy, with nothing stored. A limit already past fails at once.
TEST_F(StoreBusyTest, AWriteWaitsNoLongerThanItsTimeLimit) {
  ForRun();
  auto start = steady_clock::now();
  Status s = WriteRun("r1", start + milliseconds(300));
  auto took = steady_clock::now() - start;
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("locked"), std::string::npos) << s.message();
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(300 + 3000));  // Generous: a loaded machine.

  start = steady_clock::now();
  s = WriteRun("r2", start - milliseconds(1));
  EXPECT_FALSE(s.ok());
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
  Release();
  EXPECT_EQ(Count(store(), "SELECT count(*) FROM runs"), 0);
}

// Writes that wait for the lock together keep their own time limits: in
// whichever order they queue, and whether they share a batch or wait
// behind one, each with a limit fails at it, and the one without waits on
// and commits once the lock is let go.
TEST_F(StoreBusyTest, EachWriteInABatchOrQueueKeepsItsOwnTimeLimit) {
  ForRun();
  const auto start = steady_clock::now();
  Status first, unlimited, second;
  steady_clock::time_point second_failed;
  std::thread a([&] { first = WriteRun("first", start + milliseconds(300)); });
  std::thread b([&] { unlimited = WriteRun("unlimited"); });
  std::thread c([&] {
    second = WriteRun("second", start + milliseconds(900));
    second_failed = steady_clock::now();
  });
  a.join();
  EXPECT_FALSE(first.ok());
  c.join();
  EXPECT_FALSE(second.ok());
  EXPECT_GE(second_failed - start, milliseconds(900));
  EXPECT_LT(second_failed - start, milliseconds(900 + 3000));  // Generous.
  Release();
  b.join();
  EXPECT_TRUE(unlimited.ok()) << unlimited.message();
  EXPECT_EQ(Count(store(), "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(Count(store(), "SELECT count(*) FROM runs WHERE id = 'unlimited'"),
            1);
}

// Once the run is interrupted, its writes wait only the patience: the
// run's end is tried, and the process ends.
TEST_F(StoreBusyTest, AnInterruptedRunWaitsOnlyThePatience) {
  store().SetBusyPatience(milliseconds(50));
  ForRun();
  Status written = Status::Ok();
  std::thread run = WriteInBackground(written);
  ASSERT_TRUE(LoggedSoon("WRN store.busy "));
  const auto cancelled = steady_clock::now();
  abort_.Cancel(CancelReason::kAbort);
  run.join();
  EXPECT_FALSE(written.ok());
  // Generous: the wait ends at its next look, a tenth of a second.
  EXPECT_LT(steady_clock::now() - cancelled, std::chrono::seconds(3));
  // Its end says the lock is still held: the write failed.
  const std::vector<std::string> ended =
      logs_.LinesWith("INF store.busy_ended ");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_NE(ended[0].find("lock=\"still held\""), std::string::npos)
      << ended[0];
}

// A read of what is committed (the step cache's lookup, before an attempt
// starts) is not held behind a run's write that waits, with no time limit,
// for the lock another process holds: the write waits with the store's
// lock let go between its tries, and a read needs no write lock.
TEST_F(StoreBusyTest, AReadIsNotHeldBehindAWriteWaitingForTheLock) {
  store().SetBusyPatience(milliseconds(50));
  ForRun();
  Status written = Internal("not yet");
  std::thread run = WriteInBackground(written);
  ASSERT_TRUE(LoggedSoon("WRN store.busy "));  // It has waited 50 ms.
  auto read = std::async(std::launch::async, [&] {
    int64_t n = -1;
    Status s = store().ReadCommitted([&](Db& db) -> Status {
      Result<StatementUse> st = db.Prepared("SELECT count(*) FROM runs");
      if (!st.ok()) return st.status();
      Result<bool> row = (*st)->Step();
      if (!row.ok()) return row.status();
      if (*row) n = (*st)->Int(0);
      return Status::Ok();
    });
    return s.ok() ? n : -1;
  });
  // Generous: the read waits for one try of the write at most.
  const bool read_soon =
      read.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  Release();  // Without the fix, the read waits for this.
  EXPECT_TRUE(read_soon);
  EXPECT_EQ(read.get(), 0);
  run.join();
  EXPECT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(Count(store(), "SELECT count(*) FROM runs"), 1);
  // The read came between two tries of one wait: it did not end it.
  EXPECT_EQ(logs_.LinesWith("INF store.busy_ended ").size(), 1u);
}

// While another process holds the lock, a full queue holds no writer: a
// payload's writer waits kFullQueueWait at most once (the begin that finds
// the lock held), then its payloads stay queued; a record's writer (a
// process group's removal) never waits for the queue. Nothing is lost.
TEST_F(StoreBusyTest, AFullQueueHoldsNoWriterWhileAnotherProcessHoldsTheLock) {
  ForRun();
  const std::string line(64 << 10, 'x');
  const int lines = static_cast<int>(Store::kSoonFlushBytes / line.size()) + 8;
  auto written = std::async(std::launch::async, [&] {
    for (int i = 0; i < lines; ++i) {
      store().WriteSoon(
          [i](Db& db) { return InsertRun(db, "p" + std::to_string(i)); },
          nullptr, line.size(), Store::Soon::kPayload,
          steady_clock::now() + std::chrono::seconds(60));
    }
    store().WriteSoon([](Db& db) { return InsertRun(db, "record"); });
    store().WriteSoon([](Db& db) { return InsertRun(db, "end"); }, nullptr, 0,
                      Store::Soon::kEnd);
  });
  // Generous: each writer waits 100 ms at most, once; a loaded machine.
  const bool soon =
      written.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  Release();  // Without the change, the writers wait for this.
  written.get();
  EXPECT_TRUE(soon);
  ASSERT_TRUE(store().Flush().ok());
  EXPECT_EQ(Count(store(), "SELECT count(*) FROM runs"), lines + 2);
}

// A store no run waits on (`steps show`, `steps runs`) fails a busy
// statement after its patience, and has nothing to warn about.
TEST_F(StoreBusyTest, AStoreWithoutARunFailsAfterItsPatience) {
  store().SetBusyPatience(milliseconds(200));
  const auto start = steady_clock::now();
  Status s = WriteRun("r1");
  const auto took = steady_clock::now() - start;
  EXPECT_FALSE(s.ok());
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, milliseconds(200 + 3000));  // Generous, as above.
  EXPECT_TRUE(logs_.LinesWith("store.busy").empty());
}

}  // namespace
}  // namespace steps::store
