// The store's file: schema, pragmas, versioning and transactions.
#include "store/store.h"

#include <gtest/gtest.h>

#include <set>

#include "store_test_util.h"

namespace steps::store {
namespace {

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
            (std::set<std::string>{"agent_turns", "attempts", "cache", "jobs",
                                   "output_lines", "process_groups", "runs",
                                   "steps"}));
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

}  // namespace
}  // namespace steps::store
