#include "store/sqlite.h"

#include <errno.h>
#include <sqlite3.h>

#include <filesystem>
#include <utility>

namespace steps::store {

namespace {

Status SqliteError(sqlite3* db, const std::string& context) {
  return IoError("sqlite: " + context + ": " +
                 (db ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void Statement::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                    SQLITE_TRANSIENT);
}

void Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
}

void Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
}

void Statement::BindNull(int index) { sqlite3_bind_null(stmt_, index); }

void Statement::Bind(int index, const std::optional<int64_t>& value) {
  if (value) {
    Bind(index, *value);
  } else {
    BindNull(index);
  }
}

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, "step");
}

Status Statement::Run() {
  while (true) {
    Result<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

Status Statement::EachRow(const std::function<void(const Statement&)>& row) {
  while (true) {
    Result<bool> more = Step();
    if (!more.ok()) return more.status();
    if (!*more) return Status::Ok();
    row(*this);
  }
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::Real(int column) const {
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::Text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  if (!p) return "";
  return std::string(reinterpret_cast<const char*>(p),
                     sqlite3_column_bytes(stmt_, column));
}

std::optional<int64_t> Statement::OptionalInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int(column);
}

Result<std::unique_ptr<Db>> Db::Open(const std::string& path, bool create) {
  if (create) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  }
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<Db> db(new Db(raw));
  if (rc != SQLITE_OK) return SqliteError(raw, "open " + path);
  // Another process (a second run, `steps show`) may hold the lock briefly.
  sqlite3_busy_timeout(raw, kDefaultBusyWaitMs);
  return db;
}

void Db::SetBusyWait(BusyWait wait) {
  busy_wait_ = std::move(wait);
  if (busy_wait_) {
    sqlite3_busy_handler(db_, &Db::OnBusy, this);
  } else {
    sqlite3_busy_timeout(db_, kDefaultBusyWaitMs);
  }
}

int Db::OnBusy(void* self, int n) {
  return static_cast<Db*>(self)->busy_wait_(n) ? 1 : 0;
}

bool Db::LastErrorWasBusy() const {
  return (sqlite3_errcode(db_) & 0xff) == SQLITE_BUSY;
}

Db::~Db() {
  cache_.clear();  // Statements are finalized before the connection closes.
  if (db_) sqlite3_close(db_);
}

Status Db::Exec(std::string_view sql) {
  char* err = nullptr;
  std::string text(sql);
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string message = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return IoError("sqlite: " + message);
}

Result<StatementUse> Db::Prepared(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                           SQLITE_PREPARE_PERSISTENT, &stmt,
                           nullptr) != SQLITE_OK) {
      return SqliteError(db_, "prepare \"" + sql + "\"");
    }
    it = cache_.emplace(sql, Statement(db_, stmt)).first;
  }
  it->second.Reset();
  return StatementUse(&it->second);
}

int64_t Db::Changes() const { return sqlite3_changes64(db_); }

std::string Db::LastError() const { return sqlite3_errmsg(db_); }

// The statements of a transaction are prepared once per connection (a
// write per conversation turn is hot: parsing them each time costs as much
// as the insert).
Status Db::Run(const std::string& sql) {
  Result<StatementUse> st = Prepared(sql);
  if (!st.ok()) return st.status();
  Status s = (*st)->Run();
  (*st)->Reset();
  return s;
}

Transaction::Transaction(Db& db) : db_(db) {
  begun_ = db_.Run("BEGIN IMMEDIATE");
  done_ = !begun_.ok();
}

Transaction::~Transaction() {
  if (!done_) db_.Run("ROLLBACK");
}

bool Db::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

bool Db::LastErrorWasDiskFull() const {
  const int rc = sqlite3_errcode(db_);
  return rc == SQLITE_FULL ||
         (rc == SQLITE_IOERR && sqlite3_system_errno(db_) == ENOSPC);
}

Status Transaction::Commit() {
  if (!begun_.ok()) return begun_;
  Status s = db_.Run("COMMIT");
  if (s.ok()) done_ = true;
  return s;
}

}  // namespace steps::store
