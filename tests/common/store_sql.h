// One SQL statement on a run store from a test, through a connection of its
// own (as another process would open it): the first column of the first
// row as text, or "" when there is none.
#ifndef STEPS_TESTS_COMMON_STORE_SQL_H_
#define STEPS_TESTS_COMMON_STORE_SQL_H_

#include <sqlite3.h>

#include <string>

namespace steps::test_support {

inline std::string StoreSql(const std::string& db_path,
                            const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open(db_path.c_str(), &db) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_STORE_SQL_H_
