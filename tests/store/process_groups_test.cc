// The process groups a run records while its processes run, the upgrade
// that adds their table to an older store, and the run lock that tells a
// live run from a dead one.
#include "store/process_groups.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/clock.h"
#include "store/run_lock.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using store_testing::HeldStore;
using store_testing::TempDir;

std::string Groups(Store& store) {
  Result<std::vector<RecordedGroup>> groups = RunningGroups(store);
  if (!groups.ok()) return "error: " + groups.status().message();
  std::string text;
  for (const RecordedGroup& g : *groups) {
    text += g.run_id + " " + std::to_string(g.group.pgid) + " " +
            std::to_string(g.group.leader_start_time) + "\n";
  }
  return text;
}

TEST(ProcessGroupsTest, AGroupIsRecordedWhileItRuns) {
  TempDir dir;
  auto store = Store::Open(StorePath(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status().message();
  ProcessGroupRecorder a(**store, "run-a");
  ProcessGroupRecorder b(**store, "run-b");
  a.OnGroupStart({100, 5000}, std::nullopt);
  b.OnGroupStart({200, 6000}, std::nullopt);
  a.OnGroupStart({300, 7000}, std::nullopt);
  EXPECT_EQ(Groups(**store),
            "run-a 100 5000\nrun-a 300 7000\nrun-b 200 6000\n");
  a.OnGroupEnd({100, 5000});
  EXPECT_EQ(Groups(**store), "run-a 300 7000\nrun-b 200 6000\n");
  // A marked group is no longer running: a later run does not look again.
  RecordedGroup marked;
  marked.run_id = "run-b";
  marked.group = {200, 6000};
  ASSERT_TRUE(MarkGroup(**store, marked, "killed").ok());
  EXPECT_EQ(Groups(**store), "run-a 300 7000\n");
}

// A task's group is recorded after it starts and before its deadline is
// enforced: with the store held by another process, that write used to
// wait for the lock with no limit while the task ran on past its timeout.
// Now it waits until the deadline at most, and the task is ended then.
TEST(ProcessGroupsTest, ABusyStoreDoesNotKeepATaskPastItsDeadline) {
  using std::chrono::milliseconds;
  TempDir dir;
  const std::string path = StorePath(dir.path());
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  CancelToken abort;
  (*store)->WaitForLocksUntil(abort);
  ProcessGroupRecorder groups(**store, "run-a");
  LocalLauncherOptions options;
  options.groups = &groups;
  LocalProcessLauncher launcher(RealClock(), options);
  HeldStore held(path);
  ProcessRequest request = ProcessRequest::Shell("sleep 30");
  request.deadline = Deadline::At(RealClock().Now() + milliseconds(500));
  request.kill_grace = milliseconds(100);
  const auto start = std::chrono::steady_clock::now();
  ProcessResult result = launcher.Run(request);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.end, ProcessEnd::kTimedOut);
  EXPECT_GE(took, milliseconds(500));
  EXPECT_LT(took, milliseconds(500 + 5000));  // Generous: a loaded machine.
  held.Release();
}

TEST(ProcessGroupsTest, AVersionOneStoreGainsTheTable) {
  TempDir dir;
  const std::string path = StorePath(dir.path());
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)
                    ->Write([](Db& db) {
                      return db.Exec(
                          "DROP TABLE process_groups; PRAGMA user_version = 1");
                    })
                    .ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ProcessGroupRecorder recorder(**store, "run-a");
  recorder.OnGroupStart({100, 5000}, std::nullopt);
  EXPECT_EQ(Groups(**store), "run-a 100 5000\n");
}

TEST(RunLockTest, ARunIsLockedWhileItsLockIsHeld) {
  TempDir dir;
  EXPECT_FALSE(RunIsLocked(dir.path(), "run-a"));  // No file.
  {
    auto lock = RunLock::Acquire(dir.path(), "run-a");
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    EXPECT_TRUE(RunIsLocked(dir.path(), "run-a"));
    EXPECT_FALSE(RunIsLocked(dir.path(), "run-b"));
    // Held: nobody else takes it.
    EXPECT_FALSE(RunLock::Acquire(dir.path(), "run-a").ok());
  }
  EXPECT_FALSE(RunIsLocked(dir.path(), "run-a"));
  EXPECT_FALSE(std::filesystem::exists(RunLockPath(dir.path(), "run-a")));
}

TEST(RunLockTest, AFreeLockWhoseFileIsLeftMeansTheRunDied) {
  TempDir dir;
  // What a killed run leaves: the file, with nobody holding it.
  std::filesystem::create_directories(dir / "runs");
  std::ofstream(RunLockPath(dir.path(), "run-a")) << "";
  EXPECT_FALSE(RunIsLocked(dir.path(), "run-a"));
}

// A lock another process holds (here another descriptor: flock locks
// belong to open files) is looked at again every kLookAgain until the wait
// is over, on the given clock; no more, no less.
TEST(RunLockTest, AHeldLockIsWaitedForUpToTheBoundAndNoLonger) {
  TempDir dir;
  auto holder = RunLock::Acquire(dir.path(), "run-a");
  ASSERT_TRUE(holder.ok()) << holder.status().message();
  FakeClock clock(/*auto_advance=*/true);
  auto waited = RunLock::AcquireWithin(dir.path(), "run-a",
                                       std::chrono::seconds(10), clock);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(waited.status().message().find("still held by another process"),
            std::string::npos)
      << waited.status().message();
  EXPECT_EQ(clock.total_slept(), std::chrono::seconds(10));

  // A wait of 0 looks once and does not sleep.
  FakeClock once(/*auto_advance=*/true);
  EXPECT_FALSE(RunLock::AcquireWithin(dir.path(), "run-a", Millis(0), once).ok());
  EXPECT_EQ(once.total_slept(), Millis(0));

  // A wait shorter than one look sleeps only that long.
  FakeClock short_wait(/*auto_advance=*/true);
  EXPECT_FALSE(
      RunLock::AcquireWithin(dir.path(), "run-a", Millis(3), short_wait).ok());
  EXPECT_EQ(short_wait.total_slept(), Millis(3));
}

// Held is told apart from every other failure: only a held lock is worth
// another look.
TEST(RunLockTest, OnlyAHeldLockIsLookedAtAgain) {
  TempDir dir;
  auto holder = RunLock::Acquire(dir.path(), "run-a");
  ASSERT_TRUE(holder.ok()) << holder.status().message();
  auto second = RunLock::Acquire(dir.path(), "run-a");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);

  // A lock "file" that is a folder cannot be opened to lock: an error at
  // once, not ten seconds of looking.
  std::filesystem::create_directories(RunLockPath(dir.path(), "run-b"));
  FakeClock clock(/*auto_advance=*/true);
  auto folder = RunLock::AcquireWithin(dir.path(), "run-b",
                                       std::chrono::seconds(10), clock);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(clock.total_slept(), Millis(0));
}

// Asking whether a run is locked takes the lock shared, for a moment: a
// process asking at the same time is not taken for the run.
TEST(RunLockTest, OneAskerIsNotTakenForTheRunByAnother) {
  TempDir dir;
  std::filesystem::create_directories(dir / "runs");
  const std::string path = RunLockPath(dir.path(), "run-a");
  std::ofstream(path) << "";
  const int asking = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(asking, 0);
  ASSERT_EQ(flock(asking, LOCK_SH | LOCK_NB), 0);  // Another asker, mid-ask.
  EXPECT_FALSE(RunIsLocked(dir.path(), "run-a"));
  close(asking);
}

TEST(RunLockTest, AFreeLockIsTakenAtOnceAndALeftFileKeptWhenAsked) {
  TempDir dir;
  FakeClock clock(/*auto_advance=*/true);
  {
    auto lock = RunLock::AcquireWithin(dir.path(), "run-a",
                                       std::chrono::seconds(10), clock);
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    EXPECT_TRUE(RunIsLocked(dir.path(), "run-a"));
    (*lock)->KeepFile(true);
  }
  EXPECT_EQ(clock.total_slept(), Millis(0));
  // Kept: the file says the run died, as a killed run's does.
  EXPECT_TRUE(std::filesystem::exists(RunLockPath(dir.path(), "run-a")));
  EXPECT_FALSE(RunIsLocked(dir.path(), "run-a"));
}

}  // namespace
}  // namespace steps::store
