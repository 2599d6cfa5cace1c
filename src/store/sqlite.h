// Thin RAII owners for SQLite: a connection, a prepared statement and a
// transaction. Every SQLite error becomes a Status here, in one place.
#ifndef STEPS_STORE_SQLITE_H_
#define STEPS_STORE_SQLITE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace steps::store {

// A prepared statement. Copy deleted, move noexcept; finalized on
// destruction. Bind indexes are 1-based, column indexes 0-based.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;

  // Clears bindings and rewinds, ready for another use.
  void Reset();
  void Bind(int index, std::string_view text);
  void Bind(int index, int64_t value);
  void Bind(int index, double value);
  void BindNull(int index);
  void Bind(int index, const std::optional<int64_t>& value);

  // One step: true while a row is available, false when done.
  Result<bool> Step();
  // Runs to completion (for statements that return no rows).
  Status Run();
  // Steps through every row, calling `row` with this statement on each.
  Status EachRow(const std::function<void(const Statement&)>& row);

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Real(int column) const;
  std::string Text(int column) const;
  std::optional<int64_t> OptionalInt(int column) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// A statement in use: reset (bindings cleared, any read it holds released)
// when the use ends, so a half-read SELECT never pins an old snapshot.
class StatementUse {
 public:
  explicit StatementUse(Statement* s) : s_(s) {}
  ~StatementUse() {
    if (s_) s_->Reset();
  }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;
  StatementUse(StatementUse&& other) noexcept : s_(other.s_) {
    other.s_ = nullptr;
  }
  StatementUse& operator=(StatementUse&&) = delete;
  Statement* operator->() const { return s_; }
  Statement& operator*() const { return *s_; }

 private:
  Statement* s_;
};

// One connection. Not thread-safe by itself: callers serialize (Store does).
class Db {
 public:
  // Opens (creating it and its folder when `create`) the database at `path`.
  static Result<std::unique_ptr<Db>> Open(const std::string& path, bool create);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements that return no rows.
  Status Exec(std::string_view sql);
  // Runs one statement that returns no rows, prepared once (Prepared).
  Status Run(const std::string& sql);
  // A statement prepared once per connection and reused. The use must end
  // before the Db does.
  Result<StatementUse> Prepared(const std::string& sql);
  // The last error of this connection, for messages.
  std::string LastError() const;
  // Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  int64_t Changes() const;
  // Whether a transaction is open. SQLite ends one on its own after some
  // errors (a full disk, an I/O error), savepoints or not.
  bool InTransaction() const;
  // Whether the last call that failed failed for want of room (SQLITE_FULL,
  // or an I/O error with ENOSPC). Ask before any other call on this Db.
  bool LastErrorWasDiskFull() const;
  // Whether the last call that failed failed because another connection
  // held a lock for longer than the busy wait allowed (SQLITE_BUSY).
  bool LastErrorWasBusy() const;

  // What a statement does when another connection holds the lock it needs:
  // `wait(n)` is called for the n-th time (from 0) of one statement's wait,
  // sleeps as it sees fit, and returns whether to try again (false: the
  // statement fails with SQLITE_BUSY). Without one (the default), a
  // statement waits up to kDefaultBusyWaitMs.
  using BusyWait = std::function<bool(int n)>;
  void SetBusyWait(BusyWait wait);
  static constexpr int kDefaultBusyWaitMs = 5000;

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  static int OnBusy(void* self, int n);
  sqlite3* db_;
  std::map<std::string, Statement> cache_;
  BusyWait busy_wait_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless
// Commit() succeeded. A half-written event never reaches the file.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const Status& begun() const { return begun_; }
  Status Commit();

 private:
  Db& db_;
  Status begun_;
  bool done_ = false;
};

}  // namespace steps::store

#endif  // STEPS_STORE_SQLITE_H_
