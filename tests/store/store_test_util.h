// Shared by the store tests: temporary folders, running the real `steps`
// binary, and running pipelines through the executor with the store wired
// in as `steps run` wires it.
#ifndef STEPS_TESTS_STORE_STORE_TEST_UTIL_H_
#define STEPS_TESTS_STORE_STORE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "store/sqlite.h"

namespace steps::store::store_testing {

// Another process's write lock on the store: a connection of its own with
// a transaction open, as a second run committing or a `sqlite3` shell holds.
class HeldStore {
 public:
  explicit HeldStore(const std::string& path) {
    Result<std::unique_ptr<Db>> db = Db::Open(path, false);
    EXPECT_TRUE(db.ok());
    if (!db.ok()) return;
    db_ = std::move(*db);
    EXPECT_TRUE(db_->Exec("BEGIN IMMEDIATE").ok());
  }
  void Release() {
    if (db_) {
      EXPECT_TRUE(db_->Exec("COMMIT").ok());
    }
  }

 private:
  std::unique_ptr<Db> db_;
};

using test_support::TempDir;

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

inline std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string StepsBinary() {
  return std::string(STEPS_BINARY_DIR) + "/src/cli/steps";
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout only; stderr goes to the test's stderr.
};

// Runs `steps ARGS` and captures its standard output.
inline CommandResult RunSteps(const std::string& args) {
  std::string cmd = Quote(StepsBinary()) + " " + args;
  CommandResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace steps::store::store_testing

#endif  // STEPS_TESTS_STORE_STORE_TEST_UTIL_H_
